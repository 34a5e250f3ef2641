#!/usr/bin/env python3
"""Carry a cover letter's subject and text into a fresh format-patch cover.

usage: cover-merge.py OLD NEW   (NEW is rewritten in place)

git format-patch --cover-letter writes placeholders; the old cover letter holds
the real subject and text, followed by the generated shortlog and diffstat,
which start at the first "Author Name (N):" line.
"""
import re
import sys

SHORTLOG = re.compile(r"^\S.* \(\d+\):$")


def split(text):
    head, _, body = text.partition("\n\n")
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if SHORTLOG.match(line):
            return head, "\n".join(lines[:i]), "\n".join(lines[i:])
    sys.exit("no shortlog in cover letter")


def subject(head):
    m = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n .*)*)", head, re.M)
    return m.group(1)


old_head, old_text, _ = split(open(sys.argv[1]).read())
new_head, _, new_rest = split(open(sys.argv[2]).read())
new_head = new_head.replace("*** SUBJECT HERE ***", subject(old_head))
open(sys.argv[2], "w").write(new_head + "\n\n" + old_text + "\n" + new_rest)
