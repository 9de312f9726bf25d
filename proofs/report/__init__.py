"""Reports: the text counterexample report and timeline, and the JSON, JUnit and SARIF files CI systems read."""
