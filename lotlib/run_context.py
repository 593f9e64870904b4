"""What a notebook run needs to know about itself: where its summary goes, whether it runs inside the book.

Set by the pipeline for one run; read by `lotlib.book.summary.record` and `lotlib.plots.show`.
"""
SUMMARY_ENV = "LOTLIB_SUMMARY"  # the file `record` writes
BOOK_ENV = "LOTLIB_BOOK"  # set while the book is built: plotly.js is bundled with the site
