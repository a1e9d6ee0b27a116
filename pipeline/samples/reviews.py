"""A synthetic sentiment set whose label depends on word choice and on word order.

Each review is one or two clauses, "the acting was not good", joined by "but" or "although";
the sentiment of a clause is its adjective's, flipped by "not". After "but" the second clause
decides ("dull but brilliant" is positive); after "although" the first does. The same words in
another order can mean the opposite, so a bag of words cannot reach the accuracy a sequence model
can. Filler words, capitals and punctuation vary the surface.
"""

from __future__ import annotations

import csv
import os

import numpy as np

CSV_NAME = "reviews.csv"
NEW_CSV_NAME = "new_reviews.csv"
POSITIVE = ["good", "great", "brilliant", "moving", "superb", "charming", "gripping", "funny", "clever", "lovely"]
NEGATIVE = ["bad", "dull", "boring", "awful", "clumsy", "tedious", "weak", "bland", "silly", "messy"]
SUBJECTS = ["the acting", "the plot", "the script", "the score", "the ending", "the cast", "this film", "the pacing",
            "the dialogue", "the direction", "the camera work", "the story"]
FILLERS = ["honestly", "really", "quite", "frankly", "overall", "at times", "in the end", "to be fair", "for me"]


def _clause(random: np.random.Generator) -> tuple[str, bool]:
    positive = bool(random.integers(2))
    adjective = random.choice(POSITIVE if positive else NEGATIVE)
    negated = random.random() < 0.3
    words = [random.choice(SUBJECTS), "was"]
    if random.random() < 0.4:
        words.append(random.choice(FILLERS))
    words += ["not", adjective] if negated else [adjective]
    return " ".join(words), positive != negated


def review(random: np.random.Generator) -> tuple[str, str]:
    """One review and its label, positive or negative."""
    first, first_positive = _clause(random)
    if random.random() < 0.3:
        text, positive = first, first_positive
    else:
        second, second_positive = _clause(random)
        joiner = random.choice(["but", "although"])
        text = f"{first}, {joiner} {second}"
        positive = second_positive if joiner == "but" else first_positive
    text = text[0].upper() + text[1:] + random.choice([".", "!", "...", "."])
    return text, "positive" if positive else "negative"


def write_reviews(directory: str, rows: int = 4000, new_rows: int = 200, seed: int = 0) -> str:
    """Writes `reviews.csv` (columns review, sentiment) and `new_reviews.csv` (other reviews, numbered, without
    their sentiment: what the `predict` stage of reviews.yaml predicts) into `directory`; returns the first's path."""
    random = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CSV_NAME)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["review", "sentiment"])
        writer.writerows(review(random) for _ in range(rows))
    with open(os.path.join(directory, NEW_CSV_NAME), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "review"])
        writer.writerows((index, review(random)[0]) for index in range(new_rows))
    return path
