"""Greedy top-1 margin of a fixture target against its bf16 rounding error (no server).

For each built-in prompt (its chat template applied), the target (transformers'
DeepseekV3ForCausalLM, float32 copy of the bf16 checkpoint) generates ``--tokens`` greedy tokens;
then one forward pass of each dtype over that text scores every generated position (teacher
forcing): the float32 margin (top-1 minus top-2 logit) and the bf16 logits on the same tokens. A step's rounding error is the bf16 change of the
top-1 minus top-2 difference; a flip is a step where bf16 picks another token. Prints one JSON
line per fixture kind. Usage: python benchmarks/margin_fixture.py [--kinds margin,heads] [--tokens 64]
"""

from __future__ import annotations

import argparse
import json

import torch


def measure(kind: str, tokens: int, n_prompts: int | None) -> dict:
    from transformers import AutoTokenizer, DeepseekV3ForCausalLM

    from specbench.fixtures import build_fixtures
    from specbench.load.prompt_sets import load_prompts

    paths = build_fixtures(kind=kind)
    tok = AutoTokenizer.from_pretrained(paths.tokenizer)
    f32 = DeepseekV3ForCausalLM.from_pretrained(paths.target, torch_dtype=torch.float32).eval()
    b16 = DeepseekV3ForCausalLM.from_pretrained(paths.target, torch_dtype=torch.bfloat16).eval()
    prompts = load_prompts()[:n_prompts]
    margins, errors, flips, first_flip = [], [], 0, []
    with torch.no_grad():
        for p in prompts:
            text = tok.apply_chat_template(p.messages, add_generation_prompt=True, tokenize=False)
            ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
            n = ids.shape[1]
            seq = f32.generate(
                ids, max_new_tokens=tokens, do_sample=False, eos_token_id=None, pad_token_id=tok.eos_token_id
            )
            # teacher forcing: both dtypes score the float32 greedy text at every generated position
            lf = f32(seq).logits[0, n - 1 : -1].float()
            lb = b16(seq).logits[0, n - 1 : -1].float()
            top = lf.topk(2, dim=-1)
            i1, i2 = top.indices[:, 0], top.indices[:, 1]
            assert torch.equal(i1, seq[0, n:])
            m = top.values[:, 0] - top.values[:, 1]
            e = ((lb.gather(1, i1[:, None]) - lb.gather(1, i2[:, None]))[:, 0] - m).abs()
            margins += m.tolist()
            errors += e.tolist()
            flipped = (lb.argmax(-1) != i1).nonzero()
            flips += len(flipped)
            first_flip.append(int(flipped[0]) if len(flipped) else None)
    m, e = torch.tensor(margins), torch.tensor(errors)
    return {
        "kind": kind,
        "prompts": len(prompts),
        "steps": len(margins),
        "margin_min": float(m.min()),
        "margin_p01": float(m.quantile(0.01)),
        "margin_median": float(m.median()),
        "rounding_err_max": float(e.max()),
        "rounding_err_p99": float(e.quantile(0.99)),
        "steps_margin_below_2x_max_err": int((m < 2 * e.max()).sum()),
        "bf16_flips": flips,
        "prompts_with_a_flip": sum(f is not None for f in first_flip),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="margin,heads")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=None, help="first N built-in prompts (default: all)")
    args = ap.parse_args()
    for kind in args.kinds.split(","):
        print(json.dumps(measure(kind, args.tokens, args.prompts)), flush=True)


if __name__ == "__main__":
    main()
