"""confluent-kafka-python (Debian's python3-confluent-kafka, on Debian's librdkafka) driven by
the compatibility suite.

Usage: /usr/bin/python3 confluent_client.py <op> < request.json > response.json
The request and response are described in compat/script_test.go; bytes are base64.
"""
import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from common import deadline_loop, main, rec_out, unb64


def conf(req, **kw):
    c = {"bootstrap.servers": req["addr"], "log_level": 3}
    sec = req.get("security")
    if sec:  # a secured listener, as librdkafka properties
        c["security.protocol"] = sec["protocol"]
        c["ssl.ca.location"] = sec["ca"]
        if sec.get("mechanism"):
            c.update({"sasl.mechanisms": sec["mechanism"], "sasl.username": sec["username"],
                      "sasl.password": sec["password"]})
        if sec.get("cert"):
            c.update({"ssl.certificate.location": sec["cert"], "ssl.key.location": sec["key"]})
    c.update(kw)
    return c


def from_message(m):
    _typ, ts = m.timestamp()
    return rec_out(m.partition(), m.offset(), m.key(), m.value(), m.headers() or [], ts)


def op_version(req):
    return {"version": "%s (librdkafka %s)" % (confluent_kafka.version()[0], confluent_kafka.libversion()[0])}


def op_admin(req):
    topic = req["topic"]
    adm = AdminClient(conf(req))
    res = {"Partitions": 0, "Config": "", "Listed": False, "GoneAfterDelete": False}
    for f in adm.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                         config={"retention.ms": req["config"]})]).values():
        f.result(30)
    for f in adm.describe_configs([ConfigResource("topic", topic)]).values():
        entries = f.result(30)
        if "retention.ms" in entries:
            res["Config"] = entries["retention.ms"].value
    md = adm.list_topics(timeout=30)
    if topic in md.topics:
        res["Listed"] = True
        res["Partitions"] = len(md.topics[topic].partitions)
    for f in adm.delete_topics([topic]).values():
        f.result(30)
    for _ in deadline_loop(30):
        if topic not in adm.list_topics(timeout=30).topics:
            res["GoneAfterDelete"] = True
            break
    return {"admin": res}


class DeliveryError(Exception):
    pass


def produce(req, **extra):
    kw = {}
    if req["codec"] != "none":
        kw["compression.codec"] = req["codec"]
    kw.update(extra)
    p = Producer(conf(req, **kw))
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(err)

    for r in req["records"]:
        args = {"key": unb64(r["key"]), "value": unb64(r["value"]), "on_delivery": report}
        if r["partition"] >= 0:
            args["partition"] = r["partition"]
        if r["timestamp"]:
            args["timestamp"] = r["timestamp"]
        if r.get("headers"):
            args["headers"] = [(h["key"], unb64(h["value"])) for h in r["headers"]]
        p.produce(req["topic"], **args)
    left = p.flush(60)
    if errors:
        raise KafkaException(errors[0])
    if left:
        raise TimeoutError("%d messages not delivered" % left)
    return {}


def op_produce(req):
    return produce(req)


def op_produce_unknown(req):
    # librdkafka holds records for an unknown topic for topic.metadata.propagation.max.ms
    # (30s by default) before failing them, as against Kafka; 1s keeps the suite fast.
    return produce(req, **{"topic.metadata.propagation.max.ms": 1000})


def consumer(req, group="compat-assign"):
    return Consumer(conf(req, **{"group.id": group, "auto.offset.reset": "earliest",
                                 "enable.auto.commit": False}))


def poll_n(c, n, timeout=None):
    out = []
    for _ in deadline_loop(timeout):
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(m.error())
        out.append(from_message(m))
        if len(out) >= n:
            return out
    raise TimeoutError("read %d of %d records" % (len(out), n))


def assigned(req, tps):
    c = consumer(req)
    try:
        c.assign(tps)
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def op_consume(req):
    c = consumer(req)
    md = c.list_topics(req["topic"], timeout=30)
    c.close()
    parts = sorted(md.topics[req["topic"]].partitions)
    return assigned(req, [TopicPartition(req["topic"], p, confluent_kafka.OFFSET_BEGINNING) for p in parts])


def op_seek_offset(req):
    return assigned(req, [TopicPartition(req["topic"], req["partition"], req["offset"])])


def op_seek_time(req):
    c = consumer(req)
    try:
        tps = c.offsets_for_times([TopicPartition(req["topic"], req["partition"], req["timestamp"])], timeout=30)
        c.assign(tps)
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def op_out_of_range(req):
    # auto.offset.reset=earliest: the consumer resets to the log start.
    return assigned(req, [TopicPartition(req["topic"], req["partition"], req["high"])])


def op_group(req):
    """Two members polled in turn (librdkafka runs the group protocol in its own threads)."""
    topic, n = req["topic"], len(req["records"])
    cs = [consumer(req, req["group"]) for _ in range(2)]
    members = [{"assigned": [], "records": []} for _ in range(2)]
    try:
        for c in cs:
            c.subscribe([topic])

        def poll_all():
            for i, c in enumerate(cs):
                m = c.poll(0.05)
                if m is not None:
                    if m.error():
                        if m.error().code() != KafkaError._PARTITION_EOF:
                            raise KafkaException(m.error())
                    else:
                        members[i]["records"].append(from_message(m))
                members[i]["assigned"] = sorted(tp.partition for tp in c.assignment())

        for _ in deadline_loop(60):
            poll_all()
            a = [m["assigned"] for m in members]
            if a[0] and a[1] and len(a[0]) + len(a[1]) == 3:
                break
        else:
            raise TimeoutError("partitions not split between two members: %s" % a)
        produce(dict(req, codec="none"))
        for _ in deadline_loop(60):
            poll_all()
            if sum(len(m["records"]) for m in members) >= n:
                break
        else:
            raise TimeoutError("group did not read every record")
        for c in cs:
            c.commit(asynchronous=False)
    finally:
        for c in cs:
            c.close()
    return {"members": members}


# --- the transactional ops (TxnClient in compat/txn_test.go) ---

def txn_producer(req):
    p = Producer(conf(req, **{"transactional.id": req["transactional_id"]}))
    p.init_transactions(30)
    return p


def deliver(p, topic, records):
    """Produces records and waits for their delivery reports; raises the first error."""
    errors = []

    def report(err, _msg):
        if err is not None:
            errors.append(err)

    for r in records:
        args = {"key": unb64(r["key"]), "value": unb64(r["value"]), "partition": r["partition"], "on_delivery": report}
        if r.get("headers"):
            args["headers"] = [(h["key"], unb64(h["value"])) for h in r["headers"]]
        p.produce(topic, **args)
    left = p.flush(30)
    if errors:
        raise KafkaException(errors[0])
    if left:
        raise TimeoutError("%d messages not delivered" % left)


def op_txn_produce(req):
    p = txn_producer(req)
    p.begin_transaction()
    try:
        deliver(p, req["topic"], req["records"])
    except Exception:
        p.abort_transaction(30)
        raise
    if req.get("commit"):
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)
    return {}


def op_txn_consume(req):
    iso = "read_committed" if req.get("read_committed") else "read_uncommitted"
    c = Consumer(conf(req, **{"group.id": "compat-assign", "auto.offset.reset": "earliest",
                              "enable.auto.commit": False, "isolation.level": iso}))
    try:
        md = c.list_topics(req["topic"], timeout=30)
        parts = sorted(md.topics[req["topic"]].partitions)
        c.assign([TopicPartition(req["topic"], p, confluent_kafka.OFFSET_BEGINNING) for p in parts])
        return {"records": poll_n(c, req["n"])}
    finally:
        c.close()


def op_transform(req):
    """poll, begin, produce the copies, send_offsets_to_transaction, commit."""
    c = Consumer(conf(req, **{"group.id": req["group"], "auto.offset.reset": "earliest",
                              "enable.auto.commit": False, "isolation.level": "read_committed"}))
    p = txn_producer(req)
    try:
        c.subscribe([req["topic"]])
        copied = 0
        for _ in deadline_loop():
            if copied >= req["n"]:
                return {}
            msgs = c.consume(num_messages=10, timeout=0.2)
            batch, nxt = [], {}
            for m in msgs:
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                r = from_message(m)
                batch.append(r)
                nxt[m.partition()] = m.offset() + 1
            if not batch:
                continue
            p.begin_transaction()
            deliver(p, req["output"], batch)
            p.send_offsets_to_transaction([TopicPartition(req["topic"], part, o) for part, o in nxt.items()],
                                          c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            copied += len(batch)
        raise TimeoutError("%d of %d records copied" % (copied, req["n"]))
    finally:
        c.close()


def err_of(fn):
    try:
        fn()
    except Exception as e:
        typ, code, message = classify(e)
        return {"type": typ, "code": code, "message": message}
    return None


def op_fence(req):
    topic = req["topic"]
    first, second, third = req["records"]
    a = txn_producer(req)
    a.begin_transaction()
    deliver(a, topic, [first])
    b = txn_producer(req)  # init_transactions fences a
    b.begin_transaction()
    deliver(b, topic, [second])
    b.commit_transaction(30)
    write = err_of(lambda: deliver(a, topic, [third]))
    commit = err_of(lambda: a.commit_transaction(30))
    return {"fence": {"write": write, "commit": commit}}


def classify(e):
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        err = e.args[0]
        return "KafkaError", err.name(), err.str()
    return type(e).__name__, "", str(e)


if __name__ == "__main__":
    main(globals(), classify)
