"""Exercise spec: extracting features from a truly frozen encoder (book/batchnorm.md)."""

NAME = "frozen_features"
TITLE = "Frozen means evaluation mode"
LEVEL = "core"
ASSIGNMENT = "batchnorm"
CHAPTER = "batchnorm"

STATEMENT = r"""
Turning off gradients does not freeze an encoder. A BatchNorm layer in training mode
normalises with the current batch and **updates its stored running statistics on every
forward pass**, with or without `torch.no_grad()`; dropout keeps dropping. Write the
extraction that a probe should be trained on:

```python
frozen_features(encoder, batches)
```

**Inputs.** `encoder`, a `torch.nn.Module` mapping a batch of shape `(b, ...)` to
features of shape `(b, d)`; `batches`, an iterable whose items are either input tensors
or tuples `(input, label)` (use the input, ignore the label).

**What to do.**

1. Put the encoder in evaluation mode for the extraction and run every forward pass under
   `torch.no_grad()`.
2. Concatenate the outputs of all batches, in order, into one tensor of shape `(n, d)`,
   detached and on the CPU.
3. Leave the encoder exactly as you found it: its state dict (running statistics
   included) unchanged, and **every submodule's own `training` flag restored** to what it
   was before the call. The flags can differ between submodules (say, a training encoder
   whose BatchNorm layers were deliberately put in evaluation mode), so `encoder.train()`
   at the end is not enough.

**Return** the `(n, d)` tensor.
"""

SOLUTION = r'''import torch


def frozen_features(encoder, batches):
    """Features of `batches` from `encoder` in evaluation mode without gradients.

    Returns a detached CPU tensor of shape (n, d); every submodule's training flag is
    restored afterwards.
    """
    ### BEGIN SOLUTION
    flags = [(module, module.training) for module in encoder.modules()]
    outputs = []
    try:
        encoder.eval()
        with torch.no_grad():
            for batch in batches:
                x = batch[0] if isinstance(batch, (tuple, list)) else batch
                outputs.append(encoder(x).detach().cpu())
    finally:
        for module, was_training in flags:
            module.training = was_training
    return torch.cat(outputs, dim=0)
    ### END SOLUTION
'''

VISIBLE_TESTS = r"""import torch

torch.manual_seed(0)
enc = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2))
enc.train()
saved = {k: v.clone() for k, v in enc.state_dict().items()}
batches = [torch.randn(4, 3) + 2.0, torch.randn(2, 3) + 2.0]

feats = frozen_features(enc, batches)
assert isinstance(feats, torch.Tensor), "return a torch.Tensor"
assert tuple(feats.shape) == (6, 2), f"expected shape (6, 2), got {tuple(feats.shape)}"
assert all(torch.equal(v, saved[k]) for k, v in enc.state_dict().items()), \
    "the encoder's state changed: a training-mode forward pass moved the running statistics"
assert enc.training, "the encoder was in training mode before the call: restore it"
print("visible tests passed")
"""
VISIBLE_POINTS = 1

HIDDEN = [
    "frozen_features/eval_mode",
    "frozen_features/restores_flags",
    "frozen_features/output",
    "frozen_features/no_grad",
]
