"""The solver layer: the separability LP, the NTP-SVM backends behind one API
(:func:`ntpcert.solve.svm.solve_svm`), the structured solver, and SVMs in other norms."""
