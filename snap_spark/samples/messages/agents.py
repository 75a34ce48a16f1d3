"""The simulated agents of a message sample: their keys, their networks and how they sign.

Private keys are ``sha256(seed || index)`` (:func:`derive_key`) and the BIP-340 auxiliary
randomness of a signature is ``sha256(digest || seed)`` (:class:`MessageSigner`), so the
same seed signs the same messages with the same bytes.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from coincurve import PrivateKey

from snap_spark.protocol.jcs import canonicalize
from snap_spark.protocol.keys import (
    CURVE_ORDER,
    Network,
    internal_pubkey,
    p2tr_address,
    tweak_private_key,
)
from snap_spark.protocol.signing import signature_input
from snap_spark.samples.messages.config import SampleAgent, SampleConfig

try:  # coincurve's high-level sign_schnorr rebuilds the keypair and re-verifies every call
    from coincurve._libsecp256k1 import ffi as _ffi
    from coincurve._libsecp256k1 import lib as _lib
    from coincurve.context import GLOBAL_CONTEXT as _GLOBAL_CONTEXT

    _CTX: Any = _GLOBAL_CONTEXT.ctx
except ImportError:  # pragma: no cover - other coincurve builds: use the public API
    _lib = None
    _ffi = None
    _CTX = None

__all__ = [
    "Agent",
    "Cast",
    "MessageSigner",
    "Signer",
    "agent_networks",
    "canonical",
    "derive_key",
    "sample_agents",
]


class Signer:
    """BIP-340 signer holding its keypair (coincurve's ``sign_schnorr`` recomputes it)."""

    __slots__ = ("_keypair", "_out", "_private")

    def __init__(self, secret: bytes) -> None:
        self._private = PrivateKey(secret)
        self._keypair: Any = None
        self._out: Any = None
        if _lib is not None and _ffi is not None:
            keypair = _ffi.new("secp256k1_keypair *")
            if not _lib.secp256k1_keypair_create(_CTX, keypair, secret):
                raise ValueError("invalid secret key")
            self._keypair = keypair
            self._out = _ffi.new("unsigned char[64]")

    def sign(self, digest: bytes, aux: bytes) -> str:
        """128 lowercase hex of the BIP-340 signature of a 32-byte digest."""
        if self._keypair is None or _lib is None or _ffi is None:
            return bytes(self._private.sign_schnorr(digest, aux)).hex()
        if not _lib.secp256k1_schnorrsig_sign32(_CTX, self._out, digest, self._keypair, aux):
            raise ValueError("signing failed")
        return bytes(_ffi.buffer(self._out)).hex()


class Agent:
    """A simulated agent: identity, clock skew and cached signers."""

    __slots__ = ("address", "index", "network", "private_key", "raw_signer", "signer", "skew")

    def __init__(self, index: int, network: Network, private_key: bytes, skew: float) -> None:
        self.index = index
        self.network: Network = network
        self.private_key = private_key
        self.address = p2tr_address(internal_pubkey(private_key), network)
        self.skew = skew
        self.signer = Signer(tweak_private_key(private_key))
        self.raw_signer = Signer(private_key)  # untweaked: what a buggy signer would use


def derive_key(seed: int, label: str, index: int, domain: str = "snap-spark-sample") -> bytes:
    """The private key number ``index`` of a kind of key (``label``) under ``seed``; each
    generator derives its keys in a ``domain`` of its own."""
    counter = 0
    while True:
        material = f"{domain}|{seed}|{label}|{index}|{counter}".encode()
        key = hashlib.sha256(material).digest()
        if 0 < int.from_bytes(key, "big") < CURVE_ORDER:
            return key
        counter += 1  # pragma: no cover - probability about 2^-128


def agent_networks(config: SampleConfig) -> list[Network]:
    """The network of each agent of ``config``: the last ``testnet_share`` are on testnet."""
    testnet = round(config.agents * config.testnet_share)
    if 0 < testnet < 2 and config.agents >= 4:
        testnet = 2  # a network needs two agents to hold a conversation
    testnet = min(testnet, config.agents)
    return ["testnet" if i >= config.agents - testnet else "mainnet" for i in range(config.agents)]


def sample_agents(config: SampleConfig) -> list[SampleAgent]:
    """The agent identities a config generates (for agent cards, notebooks, debugging).

    Examples:
        >>> [a.network for a in sample_agents(SampleConfig(agents=4, testnet_share=0.5))]
        ['mainnet', 'mainnet', 'testnet', 'testnet']
    """
    agents = []
    for index, network in enumerate(agent_networks(config)):
        key = derive_key(config.seed, "agent", index)
        internal = internal_pubkey(key)
        agents.append(SampleAgent(index, network, key, internal, p2tr_address(internal, network)))
    return agents


def canonical(payload: Any) -> bytes:
    """JCS bytes of a generated payload (deep attack payloads included, so a loose depth
    limit: the verifier, not the generator, rejects them)."""
    return canonicalize(payload, max_depth=64)


class MessageSigner:
    """Signs SNAP messages of one sample, with auxiliary randomness taken from its seed."""

    __slots__ = ("_aux_tag",)

    def __init__(self, seed: int) -> None:
        self._aux_tag = f"|{seed}".encode()

    def sign(self, message: dict[str, Any], signer: Signer) -> str:
        """The ``sig`` of ``message`` by ``signer``; payloads deeper than the verifier's limit
        are signed too (a careless sender would)."""
        data = signature_input(
            message["id"], message["from"], message.get("to"), message["type"], message["method"],
            canonical(message["payload"]), message["timestamp"],
        )  # fmt: skip
        digest = hashlib.sha256(data).digest()
        return signer.sign(digest, hashlib.sha256(digest + self._aux_tag).digest())


class Cast:
    """The agents of one simulation, by network, and an outsider address on each network.

    Building it draws each agent's clock skew (within ±3 s) from ``rng``, in agent order.
    """

    def __init__(self, config: SampleConfig, rng: random.Random) -> None:
        self.rng = rng
        self.agents = [
            Agent(i, net, derive_key(config.seed, "agent", i), rng.uniform(-3.0, 3.0))
            for i, net in enumerate(agent_networks(config))
        ]
        self.by_network: dict[Network, list[Agent]] = {"mainnet": [], "testnet": []}
        for agent in self.agents:
            self.by_network[agent.network].append(agent)
        both: tuple[Network, ...] = ("mainnet", "testnet")
        self.outsiders: dict[Network, str] = {
            net: p2tr_address(internal_pubkey(derive_key(config.seed, "outsider", i)), net)
            for i, net in enumerate(both)
        }

    def other_agent(self, agent: Agent) -> Agent:
        """A random agent that is not ``agent`` (on any network)."""
        other = self.rng.choice(self.agents)
        while other is agent:
            other = self.rng.choice(self.agents)
        return other
