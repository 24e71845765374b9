"""rpa: a serving engine built around a ragged paged attention kernel with an fp8 KV cache.

Arrays are numpy arrays; bfloat16 and the fp8 formats use ml_dtypes' dtypes.
Errors from the C++ core raise ValueError with the core's message.
"""

from . import _rpa  # noqa: F401
from ._rpa import cast, quantize_kv  # noqa: F401
from ._rpa import ragged_paged_attention  # noqa: F401
from ._rpa import Attention, kv_cache_dtype  # noqa: F401
from ._rpa import Tokenizer  # noqa: F401

__all__ = ["cast", "quantize_kv", "ragged_paged_attention", "Attention", "kv_cache_dtype", "Tokenizer"]
