"""Time-to-train: hours (days, device-hours) per epoch of a data set at a predicted throughput.

    llmbench project --model gpt3-20b --hardware cs2 --dataset pile --batch 256 --seq 2048
"""
from __future__ import annotations

import math

from dataclasses import dataclass


@dataclass(frozen=True)
class Dataset:
    name: str
    tokens: float | None
    """training tokens of one epoch (None: counted in samples)"""
    samples: float | None
    """training samples (sentences, documents) of one epoch"""
    source: str


DATASETS = {
    "pile": Dataset("pile", 300e9, None,
                    "the Pile (Gao et al. 2020, arXiv:2101.00027: 825 GiB of text); one epoch is about "
                    "300B tokens with the GPT-NeoX tokenizer (Biderman et al. 2023, Pythia, "
                    "arXiv:2304.01373 Sec. 2: 300B tokens = one epoch of the Pile)"),
    "owt": Dataset("owt", 9_035_582_198, 8_013_769,
                   "OpenWebText (Gokaslan & Cohen 2019): 8,013,769 documents, 38 GB (seed 002); "
                   "9,035,582,198 GPT-2 tokens in the train split (karpathy/nanoGPT "
                   "data/openwebtext/prepare.py)"),
    "sst2": Dataset("sst2", None, 67_349,
                    "SST-2 (Socher et al. 2013; GLUE, Wang et al. 2018): 67,349 training sentences; "
                    "each is one sample padded to --seq"),
}


def get_dataset(name_or_tokens: str) -> Dataset:
    key = str(name_or_tokens).strip().lower()
    if key in DATASETS:
        return DATASETS[key]
    try:
        tokens = float(key.replace("_", "").replace(",", ""))
    except ValueError:
        raise ValueError(f"unknown dataset {name_or_tokens!r}; one of {', '.join(DATASETS)} "
                         "or a number of tokens") from None
    if not 0 < tokens < math.inf:  # NaN too
        raise ValueError(f"dataset tokens must be a positive finite number, got {name_or_tokens}")
    return Dataset("tokens", tokens, None, "given on the command line")


def epoch_time_s(ds: Dataset, *, tokens_per_s: float, samples_per_s: float) -> float:
    """Token data sets: tokens / tokens-per-s; sample data sets: samples / samples-per-s."""
    if ds.tokens is not None:
        return ds.tokens / tokens_per_s
    return ds.samples / samples_per_s


def project(ds: Dataset, pred, *, epochs: float = 1.0) -> dict:
    """Time for `epochs` epochs of `ds` at the throughput of a TrainPrediction."""
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    t = epoch_time_s(ds, tokens_per_s=pred.tokens_per_s, samples_per_s=pred.samples_per_s) * epochs
    return {"dataset": ds.name, "dataset_tokens": ds.tokens, "dataset_samples": ds.samples,
            "dataset_source": ds.source, "epochs": epochs, "seconds": t, "hours": t / 3600,
            "days": t / 86400, "device_hours": t / 3600 * pred.devices,
            "tokens_per_s": pred.tokens_per_s, "samples_per_s": pred.samples_per_s,
            "prediction": pred.to_dict()}
