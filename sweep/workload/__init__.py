"""What is sent: the seeded request stream (text, image, video, audio; shared prefixes), datasets, the prompt
lexicon, locally made media, and the cache hit rate the workload predicts.

Import each name from the module that defines it (this package lends none):
- `cache_model`: `ABOVE`, `GAP_FLAG`, `cache_flag`, `hit_gap`
- `dataset_stats`: `DatasetStats`, `dataset_stats`
- `datasets`: `DatasetItem`, `DatasetTurn`, `dataset_offsets`, `load_dataset`, `read_entries`
- `importers`: `BadEntry`, `hash_block`
- `lexicon`: `for_model`
- `media`: `media_tokens`
- `prefix_cache`: `perfect_prefix_hits`
- `requests`: `MARKERS`, `MIN_TAIL`, `build_workload`, `chat_body`, `estimated_prompt_tokens`, `generate_body`,
  `render_ids`, `sample_lengths`, `warm_media_pool`, `workload_digest`
- `sessions`: `Conversation`, `Reply`, `SessionStream`, `make_session`
- `stream`: `Requests`, `RequestStream`, `Stream`, `StreamExhausted`, `next_position`, `open_stream`, `spec_at`,
  `view_from`
- `tokens`: `TextEncoder`, `encoder_for`, `text_to_ids`, `word_id`
"""
