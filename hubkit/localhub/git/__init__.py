"""Git's side of a repo: the bare repositories (dulwich), git's own path rules, .gitattributes, .gitignore, .gitmodules."""
