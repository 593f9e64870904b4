"""One module per chapter notebook, named as the notebook: that chapter's study and its figures."""
