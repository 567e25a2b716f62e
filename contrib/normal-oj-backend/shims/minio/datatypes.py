from noj_unavailable import stand_in

Part = stand_in('MinIO')
