"""Worker of `tests/montecarlo/test_campaign_distributed.py`: one process of a two-process `jax.distributed`
job on 127.0.0.1 (CPU backend).

Run as `python -m tests._campaign_worker PROCESS_ID PORT DIRECTORY` with `JAX_PLATFORMS=cpu`: joins
the job whose coordinator (process 0) listens on `127.0.0.1:PORT`, then runs the campaign of
`CAMPAIGN` into `DIRECTORY` with the default process split (`jax.process_index()`,
`jax.process_count()`) on its local devices, and prints one JSON line with what it saw.
"""

import json
import sys

import jax


SEED, N, CHUNK_SIZE = 21, 11, 2  # 6 chunks: 0, 2, 4 and 1, 3, 5


def main(process_id: int, port: int, directory: str) -> None:
    # Before anything creates an array (the shared model does, at import).
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id
    )
    import jax.random as jr

    from jaxsim import montecarlo as mc
    from tests._sharding_worker import DISPERSIONS, oscillator_member

    res = mc.run_campaign(
        oscillator_member, DISPERSIONS, directory, key=jr.key(SEED), n=N, chunk_size=CHUNK_SIZE,
        devices=jax.local_devices(),
    )  # fmt: skip
    seen = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "local_devices": len(jax.local_devices()),
        "global_devices": len(jax.devices()),
        "complete": res.complete,
        "members": res.members.tolist(),
    }
    print(json.dumps(seen), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
