"""CommerceApi (§8): input validation, idempotency mapping, workflow requests, lookups.

- ``state_store`` -- CommerceStateStore: IdempotencyKey -> OrderId, pending then started (§4)
"""
