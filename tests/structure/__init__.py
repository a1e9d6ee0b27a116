"""Tests that each fact, rule and patch has one home (issue 37): each fails if a second copy comes back."""
