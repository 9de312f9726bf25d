"""Reports: the text counterexample report and timeline, the JSON, JUnit and SARIF files CI systems read, and the HTML page."""
