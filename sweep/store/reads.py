"""The store's reads: every query a reader needs, each returning typed records (sweep/store/records.py) through
the one read connection of `Store` (errors mapped to one line there). `Store` is this class plus the writes."""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager
from datetime import datetime

from sqlalchemy import Connection, select

from sweep.core.types import Sample
from sweep.store import queries as q
from sweep.store.environment_record import EnvironmentRecord
from sweep.store.queries import RequestTokens
from sweep.store.records import (
    PriorRecord,
    RunRecord,
    RunSummary,
    StoredRequestRow,
    StudyRecord,
    WinnerRecord,
    WorkerRecord,
)


class StoreReads:
    """What can be read of a results database."""

    @abstractmethod
    def _read(self, action: str) -> AbstractContextManager[Connection]:
        """One read-only connection, errors wrapped (Store's)."""

    def workers(self, study_id: int) -> list[WorkerRecord]:
        """Every worker that joined a study, in joining order."""
        with self._read(f"read workers of study {study_id}") as conn:
            t = q.workers_table
            return [WorkerRecord.from_row(dict(r._mapping)) for r in conn.execute(select(t).where(t.c.study_id == study_id)
                                                                            .order_by(t.c.id))]

    def study_winners(self, study_id: int) -> list[WinnerRecord]:
        """A study's stored winners, the primary tier first (empty until the study has ended)."""
        with self._read(f"read the winners of study {study_id}") as conn:
            return q.study_winners(conn, study_id)

    def study_prior(self, study_id: int) -> list[PriorRecord]:
        """A study's simulated prior (search.prior: sim), best-ranked first (empty: no prior was used)."""
        with self._read(f"read the prior of study {study_id}") as conn:
            return q.study_prior(conn, study_id)

    def completed_runs(self, study_id: int, server_config_id: int | None = None) -> list[RunRecord]:
        """Completed runs of a study (optionally of one configuration), oldest first."""
        with self._read(f"read runs of study {study_id}") as conn:
            return q.completed_runs(conn, study_id, server_config_id)

    def list_runs(self, study: str | None = None, profile: str | None = None, since: datetime | None = None,
                  status: str | None = None, limit: int | None = None) -> list[RunSummary]:
        """Rows of the run_summary view matching every given filter, newest first (naive `since` = UTC)."""
        with self._read("list runs") as conn:
            return q.list_runs(conn, study, profile, since, status, limit)

    def get_run(self, run_id: int) -> RunSummary | None:
        """One run with its knobs, study name and request/sample counts, or None."""
        with self._read(f"read run {run_id}") as conn:
            return q.get_run(conn, run_id)

    def requests_for_run(self, run_id: int) -> list[StoredRequestRow]:
        """Every request of a run in send order; times in seconds from the window start."""
        with self._read(f"read requests of run {run_id}") as conn:
            return q.requests_for_run(conn, run_id)

    def study_request_tokens(self, study_id: int) -> list[RequestTokens]:
        """(modality, sent prompt, counted prompt, sent output, counted output, error) of each measured request."""
        with self._read(f"read request tokens of study {study_id}") as conn:
            return q.study_request_tokens(conn, study_id)

    def samples_for_run(self, run_id: int, name: str | None = None) -> list[Sample]:
        """Probe samples of a run (optionally one metric name) in time order."""
        with self._read(f"read samples of run {run_id}") as conn:
            return q.samples_for_run(conn, run_id, name)

    def get_study(self, study_id: int) -> StudyRecord | None:
        """The study row with this id, or None."""
        with self._read(f"read study {study_id}") as conn:
            return q.study_by_id(conn, study_id)

    def study_runs(self, study_id: int) -> list[RunRecord]:
        """Every run of a study (any status), oldest first."""
        with self._read(f"read runs of study {study_id}") as conn:
            return q.study_runs(conn, study_id)

    def window_histograms(self, study_id: int) -> dict[int, dict[str, list[tuple[float, float]]]]:
        """Per run of a study, the server's latency histograms over its window: {run_id: {name: [(le, count)]}}."""
        from sweep.analysis.server_metrics import HISTOGRAM_SOURCE, histograms_from_samples

        with self._read(f"read histograms of study {study_id}") as conn:
            rows = q.histogram_samples(conn, study_id, HISTOGRAM_SOURCE)
        by_run: dict[int, list[Sample]] = {}
        for run_id, sample in rows:
            by_run.setdefault(run_id, []).append(sample)
        return {run_id: histograms_from_samples(rs) for run_id, rs in by_run.items()}

    def reference_runs(self, study_id: int) -> list[RunRecord]:
        """The cross-check reference-client rows of a study, oldest first."""
        with self._read(f"read reference runs of study {study_id}") as conn:
            return q.reference_runs(conn, study_id)

    def studies(self, profile: str | None = None, fingerprint: str | None = None) -> list[StudyRecord]:
        """The studies of one profile name and/or workload fingerprint, oldest first (`sweep history`)."""
        with self._read("list studies") as conn:
            return q.studies(conn, profile, fingerprint)

    def environment(self, study_id: int) -> EnvironmentRecord | None:
        """Where a study ran (latest record), its extra fields read back."""
        with self._read(f"read environment of study {study_id}") as conn:
            return q.environment(conn, study_id)
