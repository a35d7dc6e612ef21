"""Delivery of rendered reports to their channels: a directory, chat webhooks (Slack, Feishu,
DingTalk, WeCom) and e-mail over SMTP, with retries, size fitting and secret masking."""
