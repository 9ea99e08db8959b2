"""Words of issue 27's refusals (kept apart from core/protocol/wording.py, which issue 28 edits)."""

from __future__ import annotations

# The card's pointer write failed (a store fault, a full disk), as opposed to a conditional write
# that lost because another card is open (wording.CANNOT_OFFER): say what happened.
POINTER_NOT_SAVED = (
    "I needed an approval to continue, but the approval card could not be saved (the store failed), "
    "so nothing was asked and nothing ran. Please try again in a moment."
)
