"""Files on disk read and written safely: safetensors memory maps and streamed writes, pickles read
without running code, paths kept inside the checkpoint folder, checks that an opened file has
not changed, checkpoint file discovery, sharding and progress bars.
"""
