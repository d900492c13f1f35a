"""What is sent: the seeded request stream (text, image, video, audio; shared prefixes), datasets, the prompt
lexicon, locally made media, and the cache hit rate the workload predicts."""

from sweep.workload.cache_model import (
    GAP_FLAG,
    SAMPLE,
    PrefixShape,
    hit_gap,
    predicted_hit_rate,
    prefix_shape,
)
from sweep.workload.datasets import load_dataset, text_to_ids, word_id
from sweep.workload.lexicon import for_model
from sweep.workload.media import media_tokens
from sweep.workload.requests import (
    MARKERS,
    MIN_TAIL,
    build_workload,
    chat_body,
    estimated_prompt_tokens,
    generate_body,
    render_ids,
    sample_lengths,
    warm_media_pool,
    workload_digest,
)
from sweep.workload.stream import Requests, RequestStream, StreamExhausted, next_position, spec_at, view_from

__all__ = [
    "GAP_FLAG", "MARKERS", "MIN_TAIL", "PrefixShape", "RequestStream", "Requests", "SAMPLE",
    "StreamExhausted", "build_workload", "chat_body", "estimated_prompt_tokens", "for_model",
    "generate_body", "hit_gap", "load_dataset", "media_tokens", "next_position", "predicted_hit_rate",
    "prefix_shape", "render_ids", "sample_lengths", "spec_at", "text_to_ids", "view_from",
    "warm_media_pool", "word_id", "workload_digest",
]
