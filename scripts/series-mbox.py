#!/usr/bin/env python3
"""Write DIR's git format-patch files as one mbox, as a mailing list would
deliver the posting: each message with a Message-Id, the patches in reply
to the cover letter, headers unfolded (b4 0.12 cannot copy folded ones).

usage: series-mbox.py DIR > FILE.mbox
"""
import glob
import os
import sys

files = sorted(glob.glob(os.path.join(sys.argv[1], "0*.patch")))
if not files:
    sys.exit(f"no patches in {sys.argv[1]}")
name = os.path.basename(os.path.normpath(sys.argv[1]))
cover = f"<{name}.0@series.invalid>"
for i, path in enumerate(files):
    head, sep, body = open(path).read().partition("\n\n")
    head = head.replace("\n ", " ")
    head += f"\nMessage-Id: <{name}.{i}@series.invalid>"
    if i:
        head += f"\nIn-Reply-To: {cover}\nReferences: {cover}"
    sys.stdout.write(head + sep + body)
