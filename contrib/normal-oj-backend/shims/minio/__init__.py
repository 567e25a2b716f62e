'''Import stand-in for the minio package (not packaged by Debian): every
client call raises noj_unavailable.Unavailable('MinIO').'''
from noj_unavailable import stand_in

Minio = stand_in('MinIO')
