"""measure/kernels.py: the step's GEMMs timed by rows on the CPU (a tiny model, fast)."""
from __future__ import annotations

import pytest
import torch

from llmbench.measure.kernels import time_gemms
from llmbench.models import get_model
from llmbench.models.spec import resize


def test_time_gemms_times_every_layer_and_the_head_at_each_row_count():
    spec = resize(get_model("gpt2-small"), n_layers=2, d_model=64, n_heads=2)
    gt = time_gemms(spec, torch.device("cpu"), rows=(1, 4, 64), repeats=3)
    assert gt.rows == (1.0, 4.0, 64.0)
    assert len(gt.body_s) == len(gt.head_s) == 3 and all(t > 0 for t in gt.body_s + gt.head_s)


def test_time_gemms_refuses_a_moe_model():
    with pytest.raises(ValueError, match="dense models only"):
        time_gemms(get_model("mixtral-8x7b"), torch.device("cpu"), rows=(1,), repeats=1)
