"""The ``schedcheck`` command: ``main`` builds one parser from the command modules here, one handler each."""
