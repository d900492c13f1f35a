"""Many workers on one study: one worker per GPU group (`sweep sweep --gpus`), the shared study, the peer feed.
"""

from sweep.core.face import lazy

__getattr__, __dir__, __all__ = lazy(__name__, {
    "sweep.fleet.gpus": ("FleetProgress", "plan"),
    "sweep.fleet.peer_feed": ("PeerFeed",),
    "sweep.fleet.shared_study": ("create_study", "open_shared_study", "summary"),
})
