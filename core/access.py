"""Who may do what: the three roles, the permissions each grants, and the one check core runs
before any action that changes shared state or takes the shared CPUs.

Pages hide what a role may not use, but the check that counts is here, in core: a page that
forgets to hide a button still cannot act beyond its user's role. The command line is the
operator's own tool (trusted, see ARCHITECTURE.md "Security model") and acts as `OPERATOR`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

from core.errors import UserError


class Role(IntEnum):
    """Ordered: each role may do everything the roles below it may."""

    VIEWER = 1
    REVIEWER = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        """The role as written in the roles file and shown to users: "viewer", ..."""
        return self.name.lower()


class Permission(StrEnum):
    READ = "read"  # pages, single-complaint classification and explanation
    DECIDE = "decide"  # review decisions, triage verdicts, relabelled exports
    RUN_JOBS = "run_jobs"  # long work on the shared CPUs: file classification, audits, scans
    TRAIN = "train"  # train a model (it is saved to the shared models folder)
    MANAGE_MODELS = "manage_models"  # save, rename, delete and promote models
    MANAGE_DATA = "manage_data"  # retire saved data sets, retrain from the team's corrections
    SEE_ALL_TRAIL = "see_all_trail"  # everyone's audit trail, not only one's own
    CANCEL_ANY_JOB = "cancel_any_job"  # cancel another user's job
    MANAGE_TOKENS = "manage_tokens"  # create, list and revoke the intake API's tokens


# The lowest role that holds each permission.
MINIMUM_ROLE: dict[Permission, Role] = {
    Permission.READ: Role.VIEWER,
    Permission.DECIDE: Role.REVIEWER,
    Permission.RUN_JOBS: Role.REVIEWER,
    Permission.TRAIN: Role.ADMIN,
    Permission.MANAGE_MODELS: Role.ADMIN,
    Permission.MANAGE_DATA: Role.ADMIN,
    Permission.SEE_ALL_TRAIL: Role.ADMIN,
    Permission.CANCEL_ANY_JOB: Role.ADMIN,
    Permission.MANAGE_TOKENS: Role.ADMIN,
}


class AccessDenied(UserError, PermissionError):
    """An actor tried something its role does not allow; the message says which role would."""


@dataclass(frozen=True)
class Actor:
    """The person behind a request: `user` is the signed-in e-mail address, or a fixed local
    name when sign-in is off (then the server is on loopback and its one user is admin)."""

    user: str
    role: Role
    signed_in: bool

    def can(self, permission: Permission) -> bool:
        return self.role >= MINIMUM_ROLE[permission]

    def require(self, permission: Permission) -> None:
        """Raise AccessDenied unless this actor's role holds `permission`."""
        if not self.can(permission):
            raise AccessDenied(
                f"{self.user} is a {self.role.label}; {permission.value.replace('_', ' ')} "
                f"needs the {needed_role(permission).label} role (ask an admin to change the "
                "roles file)"
            )


def needed_role(permission: Permission) -> Role:
    """The lowest role that holds `permission` (what a page names when it hides an action)."""
    return MINIMUM_ROLE[permission]


# The single user of a server without sign-in (loopback only), and the command line.
LOCAL_USER = Actor("local", Role.ADMIN, signed_in=False)
OPERATOR = Actor("operator", Role.ADMIN, signed_in=False)
