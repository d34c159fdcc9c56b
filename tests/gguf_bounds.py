"""First-order bounds on how far llama.cpp's logits can be from transformers' for one GGUF file, from the
rounding its CPU kernels do and the model's own gradients (tests/export/test_gguf.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Rounding in llama.cpp's CPU kernels (ggml-cpu: each matrix product first converts its input to the weight
# type's `vec_dot_type`). BF16 weights: the input is rounded to bf16, a relative error of at most 2^-9.
# Q8_0 weights: blocks of 32 along a row, one f16 scale d = max|x|/127 each, values round(x/d) in
# [-127, 127]; the input is quantized to Q8_0 the same way. Per value, |x - q*d16| <= d/2 + 127*|d - d16|,
# and the scale's rounding to f16 is at most 2^-11 relative (2^-25 absolute below f16's normal range).
BF16_RELATIVE = 2.0**-9
F16_RELATIVE, F16_SUBNORMAL = 2.0**-11, 2.0**-25
# The bounds below are first order; this covers the second-order terms (products of two roundings, each
# below 1 % of its value) and float32 summation order, both far smaller.
SLACK = 2.0


def q8_0_error(x: torch.Tensor) -> torch.Tensor:
    """The largest error of each value of `x` quantized to Q8_0 along its last dimension (see the top)."""
    blocks = x.detach().abs().reshape(*x.shape[:-1], -1, 32)
    d = blocks.amax(-1, keepdim=True) / 127
    d_rounding = torch.maximum(d * F16_RELATIVE, torch.full_like(d, F16_SUBNORMAL))
    return (d / 2 + 127 * d_rounding).expand_as(blocks).reshape(x.shape)


@dataclass(frozen=True)
class RoundingBound:
    """Two first-order bounds on one logit's change: the worst case, and the bound that independent
    roundings keep to with probability at least 1 - `CONFIDENCE_FAILURE` (Hoeffding)."""

    worst: float
    likely: float


# Hoeffding: for independent zero-mean errors d_i with |d_i| <= e_i, P(|Σ g_i d_i| > t) <= 2 exp(-t² / (2 Σ g_i² e_i²)).
# Round-to-nearest errors of distinct weights and inputs behave so; at 1e-9 per checked logit, a few hundred
# checks fail by chance less than once in a million runs.
CONFIDENCE_FAILURE = 1e-9
HOEFFDING = math.sqrt(2 * math.log(2 / CONFIDENCE_FAILURE))


def rounding_bounds(
    model, ids: list[int], directions: list[tuple[int, torch.Tensor]], weight_type: str
) -> list[RoundingBound]:
    """For each (position, direction), bounds on how far llama.cpp's `direction · logits[position]` can be
    from transformers' when the file stores the weights as `weight_type` and llama.cpp rounds each matrix
    product's input to it.

    First order: Δz = Σ ∂z/∂w·δw + Σ ∂z/∂a·δa, over every weight w (embedding rows, every Linear, the
    output layer) and every input a of a matrix product (q/k/v/o, gate/up/down, the output layer), with the
    exact derivatives of this model at this input, each |δ| at most its rounding error (see the top).
    Worst case: Σ |∂z/∂x|·err(x); likely: HOEFFDING·sqrt(Σ (∂z/∂x·err(x))²); both times SLACK. Norms,
    biases, attention and the KV cache (F32 here) are exact in both. The output layer and the embedding are
    done by hand (z = d·(W h) touches only the rows d selects; the embedding only the prompt's rows), so
    that autograd never builds a vocabulary-sized gradient.
    """
    quantized = weight_type == "q8_0"
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings().weight
    inputs: dict[int, torch.Tensor] = {}

    def keep_input(_module, args, _output):
        args[0].retain_grad()
        inputs[id(args[0])] = args[0]  # q, k and v share one input: its gradient sums all three uses

    def embedded_leaf(_module, _args, output):
        return output.detach().requires_grad_()

    def error(x: torch.Tensor) -> torch.Tensor:
        return q8_0_error(x) if quantized else x.detach().abs() * BF16_RELATIVE

    hooks = [
        m.register_forward_hook(keep_input) for m in model.model.modules() if isinstance(m, torch.nn.Linear)
    ]
    hooks.append(embedding.register_forward_hook(embedded_leaf))
    frozen = [p for p in (embedding.weight, head) if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    try:
        output = model.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
        for p in frozen:
            p.requires_grad_(True)
    hidden = output.last_hidden_state[0]  # the output layer's input
    embedded = output.hidden_states[0]
    layer_weights = [p for p in model.model.layers.parameters() if p.dim() == 2]
    weight_errors = {p: q8_0_error(p) for p in layer_weights} if quantized else {}
    input_errors = {key: error(a) for key, a in inputs.items()}
    embedding_errors = q8_0_error(embedding.weight[ids]) if quantized else None
    bounds = []
    for position, direction in directions:
        rows = direction.nonzero().squeeze(1)
        u = (head[rows].T @ direction[rows]).detach()  # z = u · hidden[position]
        model.zero_grad(set_to_none=True)
        for a in [*inputs.values(), embedded]:
            a.grad = None
        (hidden[position] @ u).backward(retain_graph=True)
        terms = [u.abs() * error(hidden[position])]
        terms += [inputs[key].grad.abs() * e for key, e in input_errors.items()]
        if quantized:
            terms.append(
                direction[rows].abs()[:, None] * hidden[position].detach().abs() * q8_0_error(head[rows])
            )
            terms += [p.grad.abs() * e for p, e in weight_errors.items() if p.grad is not None]
            terms.append(embedded.grad[0].abs() * embedding_errors)
        worst = sum(float(t.sum()) for t in terms)
        likely = HOEFFDING * math.sqrt(sum(float(t.square().sum()) for t in terms))
        bounds.append(RoundingBound(SLACK * worst, SLACK * likely))
    return bounds


def unit(vocab: int, *tokens_and_signs: tuple[int, float]) -> torch.Tensor:
    direction = torch.zeros(vocab)
    for token, sign in tokens_and_signs:
        direction[token] = sign
    return direction
