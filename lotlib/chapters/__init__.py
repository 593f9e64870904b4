"""One module per chapter notebook, named as the notebook: that chapter's study, its claim values and its figures."""
