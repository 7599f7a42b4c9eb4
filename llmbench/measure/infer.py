"""Inference latency: encoder classification against batch; decoder prefill and KV-cache decode.

    llmbench measure infer --model bert-base --batch 1,8,32 --seq 128
    llmbench measure infer --model gpt2-small --batch 1 --seq 128 --gen-len 32

`w.batch` sequences (concurrent requests) of `w.seq_len` tokens. Encoders (head cls/mlm/none):
one forward per request batch, latency p50/p90/p99 over `run.repeats`. Decoders (head lm): prefill
of the prompt into a KV cache (median of the repeats: time to first token), then `w.gen_len`
greedy decode steps of one token per sequence, each timed: decode tokens/s over the batch and
per sequence, and a request's latency = time to first token + the whole decode.
"""
from __future__ import annotations

import statistics

import torch

from llmbench.measure import device as dev
from llmbench.measure.common import datasheet_peak_flops, mfu, percentile
from llmbench.measure.modeling import build_model
from llmbench.models.counting import decode_flops, model_ops


def run_infer(w, run, device: torch.device) -> tuple[dict, dict]:
    """Inference of w.spec() on w.batch requests: (metrics, info)."""
    spec = w.spec()
    dev.set_precision(device, w.precision)
    torch.manual_seed(run.seed)
    model = build_model(spec, device=device, dtype=dev.dtype_of(w.precision)).eval()
    idx = torch.randint(0, spec.vocab_size, (w.batch, w.seq_len), device=device)
    dev.reset_peak_memory(device)
    with torch.inference_mode():
        m, info = (_decoder if spec.head == "lm" else _encoder)(model, spec, idx, w, run, device)
    m["peak_mem_bytes"] = dev.peak_memory_bytes(device)
    m["mfu"] = mfu(w, m["achieved_tflops"] * 1e12)
    info["datasheet"] = datasheet_peak_flops(w)[1]
    return m, info


def _encoder(model, spec, idx, w, run, device) -> tuple[dict, dict]:
    B, T = idx.shape
    times, warm = dev.time_fn(lambda: model(idx), device, repeats=run.repeats, warmup=run.warmup)
    flops = sum(o.flops for o in model_ops(spec, B, T, w.precision))
    p50 = percentile(times, 50)
    m = {"latency_s_p50": p50, "latency_s_p90": percentile(times, 90),
         "latency_s_p99": percentile(times, 99), "samples_per_s": B / p50, "tokens_per_s": B * T / p50,
         "achieved_tflops": flops / p50 / 1e12, "warmup_s": warm}
    return m, {"latency_s_mean": statistics.fmean(times), "flops": flops}


def _decoder(model, spec, idx, w, run, device) -> tuple[dict, dict]:
    B, T = idx.shape
    gen = w.gen_len

    def prefill():
        caches = model.new_caches(B, T + gen)
        logits = model(idx, caches=caches)
        return caches, logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)

    prefill_times, warm = dev.time_fn(prefill, device, repeats=max(1, run.repeats // 4), warmup=run.warmup)
    caches, nxt = prefill()
    decode_times = []
    for t in range(gen):
        with dev.Timer(device) as timer:
            nxt = model(nxt, caches=caches, start=T + t)[:, -1].argmax(-1, keepdim=True)
        decode_times.append(timer.elapsed_s)
    pre = statistics.median(prefill_times)
    flops_pre = sum(o.flops for o in model_ops(spec, B, T, w.precision))
    m = {"prefill_time_s": pre, "prefill_tokens_per_s": B * T / pre, "time_to_first_token_s": pre,
         "achieved_tflops": flops_pre / pre / 1e12, "warmup_s": warm}
    info = {"flops_prefill": flops_pre, "prefill_repeats": len(prefill_times)}
    if decode_times:
        per_token = statistics.median(decode_times)
        m.update({"decode_time_s_per_token": per_token, "decode_tokens_per_s": B / per_token,
                  "decode_tokens_per_s_per_seq": 1.0 / per_token,
                  "tokens_per_s": B * gen / sum(decode_times), "latency_s_p50": pre + sum(decode_times)})
        info.update({"decode_time_s_per_token_p90": percentile(decode_times, 90),
                     "decode_achieved_tflops": decode_flops(spec, T + gen // 2, B) / per_token / 1e12})
    return m, info
