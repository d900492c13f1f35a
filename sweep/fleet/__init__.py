"""Many workers on one study: one worker per GPU group (`sweep sweep --gpus`), the shared study, the peer feed."""

from sweep.fleet.gpus import FleetProgress, plan
from sweep.fleet.peer_feed import PeerFeed
from sweep.fleet.shared_study import create_study, open_shared_study, summary

__all__ = ["FleetProgress", "PeerFeed", "create_study", "open_shared_study", "plan", "summary"]
