'''Import stand-in for mosspy (not packaged by Debian): using Moss raises
noj_unavailable.Unavailable('MOSS').'''
from noj_unavailable import stand_in

Moss = stand_in('MOSS')
