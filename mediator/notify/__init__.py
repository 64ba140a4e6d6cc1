"""Phone notifications: the wallet apps and their providers (FCM, APNs, a signed webhook),
the devices wallets register, and the notifier the workers run."""
