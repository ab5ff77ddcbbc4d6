"""kafka-python (Debian's python3-kafka) driven by the compatibility suite.

Usage: /usr/bin/python3 kafka_python_client.py <op> < request.json > response.json
The request and response are described in compat/script_test.go; bytes are base64.
An "api_version" in the request's extra (e.g. [0, 10]) pins the protocol version, which makes
kafka-python speak old Produce/Fetch versions and message formats.
"""
import logging
import threading

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from common import deadline_loop, main, rec_out, unb64


class Warnings(logging.Handler):
    """Keeps what kafka-python logs at WARNING and above: some errors (e.g. an error code
    it does not know) are only logged, and the suite checks them."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


warnings = Warnings()
logging.getLogger("kafka").addHandler(warnings)


def versioned(req, **kw):
    """Client settings plus the pinned api_version, if any."""
    kw["bootstrap_servers"] = req["addr"]
    v = (req.get("extra") or {}).get("api_version")
    if v:
        kw["api_version"] = tuple(v)
    sec = req.get("security")
    if sec:  # a secured listener, configured as kafka-python's users do
        kw["security_protocol"] = sec["protocol"]
        kw["ssl_cafile"] = sec["ca"]
        if sec.get("mechanism"):
            kw["sasl_mechanism"] = sec["mechanism"]
            kw["sasl_plain_username"] = sec["username"]
            kw["sasl_plain_password"] = sec["password"]
        if sec.get("cert"):
            kw["ssl_certfile"] = sec["cert"]
            kw["ssl_keyfile"] = sec["key"]
    return kw


def from_record(m):
    # Message format v0 has no timestamp: kafka-python reports None or -1.
    ts = -1 if m.timestamp is None else m.timestamp
    return rec_out(m.partition, m.offset, m.key, m.value,
                   [(k, v) for k, v in (m.headers or [])], ts)


def op_version(req):
    return {"version": kafka.__version__}


def op_admin(req):
    topic = req["topic"]
    adm = KafkaAdminClient(**versioned(req))
    try:
        adm.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                    topic_configs={"retention.ms": req["config"]})])
        res = {"Partitions": 0, "Config": "", "Listed": False, "GoneAfterDelete": False}
        for resp in adm.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]):
            for (_err, _msg, _typ, _name, entries) in resp.resources:
                for e in entries:
                    if e[0] == "retention.ms":
                        res["Config"] = e[1]
        res["Listed"] = topic in adm.list_topics()
        for t in adm.describe_topics([topic]):
            if t["topic"] == topic:
                res["Partitions"] = len(t["partitions"])
        adm.delete_topics([topic])
        for _ in deadline_loop(30):
            if topic not in adm.list_topics():
                res["GoneAfterDelete"] = True
                break
        return {"admin": res}
    finally:
        adm.close()


def produce(req, **extra):
    kw = versioned(req, **extra)
    if req["codec"] != "none":
        kw["compression_type"] = req["codec"]
    p = KafkaProducer(**kw)
    try:
        futures = []
        for r in req["records"]:
            futures.append(p.send(
                req["topic"], key=unb64(r["key"]), value=unb64(r["value"]),
                headers=[(h["key"], unb64(h["value"])) for h in (r.get("headers") or [])] or None,
                partition=None if r["partition"] < 0 else r["partition"],
                timestamp_ms=r["timestamp"] or None))
        p.flush(timeout=30)
        for f in futures:
            f.get(timeout=30)
        return {}
    finally:
        p.close(timeout=10)


def op_produce(req):
    return produce(req)


def op_produce_unknown(req):
    # kafka-python waits max_block_ms (60s by default) for metadata of the topic before it
    # gives up with KafkaTimeoutError, as against Kafka; 2s keeps the suite fast.
    return produce(req, max_block_ms=2000)


def consumer(req, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    return KafkaConsumer(**versioned(req, **kw))


def poll_n(c, n, timeout=None):
    out = []
    for _ in deadline_loop(timeout):
        for recs in c.poll(timeout_ms=200).values():
            out.extend(from_record(m) for m in recs)
        if len(out) >= n:
            return out
    raise TimeoutError("read %d of %d records" % (len(out), n))


def op_consume(req):
    c = consumer(req)
    try:
        parts = None
        for _ in deadline_loop(30):
            parts = c.partitions_for_topic(req["topic"])
            if parts:
                break
        tps = [TopicPartition(req["topic"], p) for p in sorted(parts)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def assigned_consumer(req, position):
    c = consumer(req)
    tp = TopicPartition(req["topic"], req["partition"])
    c.assign([tp])
    position(c, tp)
    return c


def op_seek_offset(req):
    c = assigned_consumer(req, lambda c, tp: c.seek(tp, req["offset"]))
    try:
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def op_seek_time(req):
    def position(c, tp):
        found = c.offsets_for_times({tp: req["timestamp"]})[tp]
        c.seek(tp, found.offset)
    c = assigned_consumer(req, position)
    try:
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def op_out_of_range(req):
    # auto_offset_reset="earliest": the consumer resets to the log start.
    c = assigned_consumer(req, lambda c, tp: c.seek(tp, req["high"]))
    try:
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def op_group(req):
    """Two members in threads (a member's poll blocks while its group rebalances)."""
    topic, n = req["topic"], len(req["records"])
    lock = threading.Lock()
    stop = threading.Event()
    members = [{"assigned": [], "records": []} for _ in range(2)]
    errors = []

    def run(i):
        try:
            c = consumer(req, group_id=req["group"])
            c.subscribe([topic])
            while not stop.is_set():
                batch = c.poll(timeout_ms=100)
                with lock:
                    members[i]["assigned"] = sorted(tp.partition for tp in c.assignment())
                    for recs in batch.values():
                        members[i]["records"].extend(from_record(m) for m in recs)
            c.commit()
            c.close()
        except Exception as e:  # reported to the suite
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in deadline_loop(60):
            with lock:
                if errors:
                    raise errors[0]
                a = [m["assigned"] for m in members]
            if a[0] and a[1] and len(a[0]) + len(a[1]) == 3:
                break
        else:
            raise TimeoutError("partitions not split between two members: %s" % a)
        produce(dict(req, codec="none"))
        for _ in deadline_loop(60):
            with lock:
                if errors:
                    raise errors[0]
                if sum(len(m["records"]) for m in members) >= n:
                    # The answer is taken now: once the first member closes (LeaveGroup),
                    # the second's last poll could rejoin and take every partition.
                    answer = [{"assigned": list(m["assigned"]), "records": list(m["records"])} for m in members]
                    break
        else:
            raise TimeoutError("group did not read every record")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    if errors:
        raise errors[0]
    return {"members": answer}


def classify(e):
    message = str(e)
    if warnings.messages:
        message += " (kafka-python logged: %s)" % "; ".join(warnings.messages[-3:])
    return type(e).__name__, str(getattr(e, "errno", "")), message


if __name__ == "__main__":
    main(globals(), classify)
