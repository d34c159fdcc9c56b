"""Pushing from inside training frameworks (`trl.HubkitPushCallback`)."""
