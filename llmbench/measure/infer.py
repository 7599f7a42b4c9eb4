"""Inference latency: encoder classification against batch; decoder prefill and KV-cache decode.

    llmbench measure infer --model bert-base --batch 1,8,32 --seq 128
    llmbench measure infer --model gpt2-small --batch 1 --seq 128 --gen-len 32

Encoders (head cls/mlm/none): one forward per request batch, latency p50/p90/p99 over `repeats`.
Decoders (head lm): prefill of `seq` tokens into a KV cache, then `gen_len` greedy decode steps of
one token per sequence; tokens/s of each phase, time to first token, per-token decode latency.
"""
from __future__ import annotations

import statistics

import torch

from llmbench.measure import device as dev
from llmbench.measure.common import datasheet_peak_flops, model_from_config, percentile
from llmbench.measure.modeling import build_model
from llmbench.models.counting import decode_flops, model_ops

DEFAULTS = {"batch": 1, "seq": 128, "gen_len": 16, "precision": "fp32", "device": "auto",
            "repeats": 20, "warmup": 2, "hardware": None, "seed": 0}


def run_infer(config: dict) -> dict:
    cfg = {**DEFAULTS, **config}
    spec = model_from_config(cfg)
    device = dev.resolve(cfg["device"])
    ok, why = dev.supports_dtype(device, cfg["precision"])
    if not ok:
        raise ValueError(why)
    B, T = int(cfg["batch"]), int(cfg["seq"])
    gen = int(cfg["gen_len"]) if spec.head == "lm" else 0
    if T + gen > spec.max_seq_len:
        raise ValueError(f"seq + gen_len = {T + gen} exceeds {spec.name}'s max_seq_len {spec.max_seq_len}")
    dev.set_precision(device, cfg["precision"])
    torch.manual_seed(cfg["seed"])
    model = build_model(spec, device=device, dtype=dev.dtype_of(cfg["precision"])).eval()
    idx = torch.randint(0, spec.vocab_size, (B, T), device=device)
    dev.reset_peak_memory(device)
    with torch.inference_mode():
        out = _decoder(model, spec, idx, gen, cfg, device) if spec.head == "lm" else \
            _encoder(model, spec, idx, cfg, device)
    out["peak_mem_bytes"] = dev.peak_memory_bytes(device)
    peak, hw = datasheet_peak_flops(device, cfg["precision"], cfg["hardware"])
    out["mfu"] = out["achieved_tflops"] * 1e12 / peak if peak else None
    out["datasheet"] = hw
    return out


def _latency(times: list[float]) -> dict:
    return {"latency_s_p50": percentile(times, 50), "latency_s_p90": percentile(times, 90),
            "latency_s_p99": percentile(times, 99), "latency_s_mean": statistics.fmean(times)}


def _encoder(model, spec, idx, cfg, device) -> dict:
    B, T = idx.shape
    times, warm = dev.time_fn(lambda: model(idx), device, repeats=int(cfg["repeats"]),
                              warmup=int(cfg["warmup"]))
    flops = sum(o.flops for o in model_ops(spec, B, T, cfg["precision"]))
    m = _latency(times)
    m.update({"samples_per_s": B / m["latency_s_p50"], "tokens_per_s": B * T / m["latency_s_p50"],
              "achieved_tflops": flops / m["latency_s_p50"] / 1e12, "warmup_s": warm})
    return m


def _decoder(model, spec, idx, gen, cfg, device) -> dict:
    B, T = idx.shape

    def prefill():
        caches = model.new_caches(B, T + gen)
        logits = model(idx, caches=caches)
        return caches, logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)

    prefill_times, warm = dev.time_fn(prefill, device, repeats=max(1, int(cfg["repeats"]) // 4),
                                      warmup=int(cfg["warmup"]))
    caches, nxt = prefill()
    decode_times = []
    for t in range(gen):
        with dev.Timer(device) as timer:
            nxt = model(nxt, caches=caches, start=T + t)[:, -1].argmax(-1, keepdim=True)
        decode_times.append(timer.elapsed_s)
    pre = statistics.median(prefill_times)
    flops_pre = sum(o.flops for o in model_ops(spec, B, T, cfg["precision"]))
    m = {"prefill_time_s": pre, "prefill_tokens_per_s": B * T / pre, "time_to_first_token_s": pre,
         "achieved_tflops": flops_pre / pre / 1e12, "warmup_s": warm, "gen_len": gen}
    if decode_times:
        per_token = statistics.median(decode_times)
        mid = decode_flops(spec, T + gen // 2, B)
        m.update({"decode_time_s_per_token": per_token, "decode_tokens_per_s": B / per_token,
                  "decode_time_s_p90": percentile(decode_times, 90),
                  "decode_achieved_tflops": mid / per_token / 1e12,
                  "tokens_per_s": B * gen / sum(decode_times), **_latency(decode_times)})
    return m
