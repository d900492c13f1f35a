"""What is sent: the seeded request stream (text, image, video, audio; shared prefixes), datasets, the prompt
lexicon, locally made media, and the cache hit rate the workload predicts.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.workload.cache_model": (
        "ABOVE", "GAP_FLAG", "cache_flag", "hit_gap",
    ),
    "sweep.workload.datasets": ("DatasetItem", "DatasetTurn", "dataset_offsets", "load_dataset", "read_entries"),
    "sweep.workload.dataset_stats": ("DatasetStats", "dataset_stats"),
    "sweep.workload.importers": ("BadEntry", "hash_block"),
    "sweep.workload.prefix_cache": ("perfect_prefix_hits",),
    "sweep.workload.tokens": ("TextEncoder", "encoder_for", "text_to_ids", "word_id"),
    "sweep.workload.lexicon": ("for_model",),
    "sweep.workload.media": ("media_tokens",),
    "sweep.workload.requests": (
        "MARKERS", "MIN_TAIL", "build_workload", "chat_body", "estimated_prompt_tokens",
        "generate_body", "render_ids", "sample_lengths", "warm_media_pool", "workload_digest",
    ),
    "sweep.workload.sessions": ("Conversation", "Reply", "SessionStream", "make_session"),
    "sweep.workload.stream": (
        "Requests", "RequestStream", "Stream", "StreamExhausted", "next_position", "open_stream", "spec_at",
        "view_from",
    ),
})
