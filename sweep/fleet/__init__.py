"""Many workers on one study: one worker per GPU group (`sweep sweep --gpus`), the shared study, the peer feed.

Import each name from the module that defines it (this package lends none):
- `gpus`: `FleetProgress`, `plan`
- `peer_feed`: `PeerFeed`
- `shared_study`: `create_study`, `open_shared_study`, `summary`
"""
