"""Predicted weight-streaming crossover and streamed/resident ratio, for the streaming runtime.

    .venv/bin/python benchmarks/predict_streaming_crossover.py

The streaming runtime measures streamed vs resident step time on this CPU; this prints what the
analytical model predicts for the same models (seq 128 for GPT-2 small/medium, 1024 for GPT-2 XL,
2048 for GPT-3 6.7B) on the CPU and on hardware streaming over PCIe or MemoryX.
"""
from llmbench.hardware import get_hardware
from llmbench.models import get_model
from llmbench.perfmodel import streaming_crossover_tokens, streaming_ratio

ROWS = [("gpt2-small", 128), ("gpt2-medium", 128), ("gpt2-xl", 1024), ("gpt3-6.7b", 2048)]
HW = [("cpu", "fp32"), ("a100-80gb", "bf16"), ("h200-sxm", "bf16"), ("cs2", "bf16")]


def main() -> None:
    print("| model | hardware | precision | crossover tokens/step | streamed/resident at 1 x seq | at 16 x seq |")
    print("|---|---|---|---|---|---|")
    for model, seq in ROWS:
        for name, prec in HW:
            if name == "cpu" and model == "gpt3-6.7b":
                continue
            spec, hw = get_model(model), get_hardware(name)
            x = streaming_crossover_tokens(spec, hw, prec, seq=seq)
            r1 = streaming_ratio(spec, hw, batch=1, seq=seq, precision=prec)
            r16 = streaming_ratio(spec, hw, batch=16, seq=seq, precision=prec)
            print(f"| {model} | {name} | {prec} | {x:,.0f} | {r1:.3f} | {r16:.3f} |")


if __name__ == "__main__":
    main()
