"""flambeau.nn.attention: FlexAttention (flambeau.nn.attention.flex_attention), as torch.nn.attention.
The submodule is imported on first use."""
import importlib


def __getattr__(name):
    if name == "flex_attention":
        return importlib.import_module(".flex_attention", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
