"""Who may call the control plane: principals and roles (principals.py), what each role may call
(access.py), the TLS credentials of the listener (tls.py) and the audit log of mutations (audit.py).
The interceptors that apply them are in api/auth.py."""
