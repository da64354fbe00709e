"""Long work as tasks of the server's one queue (core.jobs): trainings and their estimates,
file classification, label audits, order scans and the Explain page's sample. Each module turns
one kind of work from core.models or core.analysis into a task for a requester, with its lane,
limits and role, and keeps what a finished task holds small."""
