# nbgrader reads this file from the folder it runs in; the configuration lives in grader/.
c = get_config()  # noqa: F821
load_subconfig("grader/nbgrader_config.py")  # noqa: F821
