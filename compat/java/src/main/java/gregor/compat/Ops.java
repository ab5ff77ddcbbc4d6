package gregor.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/** The scenario's ops (the Client interface of compat/scenario_test.go). */
final class Ops {
  private static final Duration CLOSE = Duration.ofSeconds(10);

  private Ops() {}

  static ObjectNode version() throws Exception {
    Properties p = new Properties();
    try (InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      p.load(in);
    }
    ObjectNode o = Main.JSON.createObjectNode();
    o.put("version", p.getProperty("version", "unknown"));
    return o;
  }

  static ObjectNode admin(Request r) throws Exception {
    String topic = r.topic();
    ObjectNode res = Main.JSON.createObjectNode();
    try (Admin adm = Admin.create(r.base("admin"))) {
      NewTopic nt = new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", r.text("config")));
      adm.createTopics(List.of(nt)).all().get(30, TimeUnit.SECONDS);
      ConfigResource cr = new ConfigResource(ConfigResource.Type.TOPIC, topic);
      Config cfg = adm.describeConfigs(List.of(cr)).all().get(30, TimeUnit.SECONDS).get(cr);
      res.put("Config", cfg.get("retention.ms") == null ? "" : cfg.get("retention.ms").value());
      res.put("Listed", adm.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic));
      TopicDescription d = adm.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
      res.put("Partitions", d.partitions().size());
      adm.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
      boolean gone = false;
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (!gone && System.nanoTime() - end < 0) {
        gone = !adm.listTopics().names().get(30, TimeUnit.SECONDS).contains(topic);
        if (!gone) {
          Thread.sleep(10); // polling a condition with a deadline
        }
      }
      res.put("GoneAfterDelete", gone);
    }
    ObjectNode o = Main.JSON.createObjectNode();
    o.set("admin", res);
    return o;
  }

  /**
   * produce writes the request's records with its codec through the client's default
   * producer (idempotent, acks=all) and waits for every acknowledgement.
   */
  static ObjectNode produce(Request r) throws Exception {
    return produceWith(r, Map.of());
  }

  /**
   * produceUnknown: the producer waits for an unknown topic's metadata until max.block.ms
   * (60 s by default), as against Kafka; 5 s keeps the suite fast.
   */
  static ObjectNode produceUnknown(Request r) throws Exception {
    return produceWith(r, Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000"));
  }

  static ObjectNode produceWith(Request r, Map<String, String> extra) throws Exception {
    Properties p = r.producer("producer");
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, r.json.path("codec").asText("none"));
    p.putAll(extra);
    try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
      try {
        send(prod, r.records(r.topic()), r);
      } finally {
        prod.close(CLOSE);
      }
    }
    return Main.JSON.createObjectNode();
  }

  /** send produces records and waits for their acknowledgements; the first error is thrown. */
  static void send(KafkaProducer<byte[], byte[]> prod, List<ProducerRecord<byte[], byte[]>> recs, Request r) throws Exception {
    List<Future<RecordMetadata>> acks = new ArrayList<>();
    for (ProducerRecord<byte[], byte[]> rec : recs) {
      acks.add(prod.send(rec));
    }
    prod.flush();
    for (Future<RecordMetadata> f : acks) {
      f.get(Math.max(1, r.left().toMillis()), TimeUnit.MILLISECONDS);
    }
  }

  static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> c, String topic, Request r) {
    List<TopicPartition> out = new ArrayList<>();
    for (PartitionInfo pi : c.partitionsFor(topic, r.left())) {
      out.add(new TopicPartition(topic, pi.partition()));
    }
    return out;
  }

  /** pollN reads until n records (of partition, or every one when partition < 0) or the deadline. */
  static ArrayNode pollN(KafkaConsumer<byte[], byte[]> c, int n, int partition, Request r) throws Exception {
    ArrayNode out = Main.JSON.createArrayNode();
    while (out.size() < n) {
      if (r.expired()) {
        throw r.timeout("read " + out.size() + " of " + n + " records");
      }
      for (ConsumerRecord<byte[], byte[]> m : c.poll(Duration.ofMillis(100))) {
        if (partition < 0 || m.partition() == partition) {
          out.add(Request.recOut(m));
        }
      }
    }
    return out;
  }

  static ObjectNode records(ArrayNode recs) {
    ObjectNode o = Main.JSON.createObjectNode();
    o.set("records", recs);
    return o;
  }

  static KafkaConsumer<byte[], byte[]> consumer(Request r, Properties p) {
    return new KafkaConsumer<>(p);
  }

  /** consume assigns every partition of the topic (no group) and reads from the beginning. */
  static ObjectNode consume(Request r) throws Exception {
    return readAll(r, r.consumer("consumer"));
  }

  static ObjectNode readAll(Request r, Properties p) throws Exception {
    try (KafkaConsumer<byte[], byte[]> c = consumer(r, p)) {
      List<TopicPartition> tps = partitions(c, r.topic(), r);
      c.assign(tps);
      c.seekToBeginning(tps);
      return records(pollN(c, r.n(), -1, r));
    }
  }

  static ObjectNode seekOffset(Request r) throws Exception {
    try (KafkaConsumer<byte[], byte[]> c = consumer(r, r.consumer("consumer"))) {
      TopicPartition tp = new TopicPartition(r.topic(), r.partition());
      c.assign(List.of(tp));
      c.seek(tp, r.number("offset"));
      return records(pollN(c, r.n(), r.partition(), r));
    }
  }

  static ObjectNode seekTime(Request r) throws Exception {
    try (KafkaConsumer<byte[], byte[]> c = consumer(r, r.consumer("consumer"))) {
      TopicPartition tp = new TopicPartition(r.topic(), r.partition());
      Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(Map.of(tp, r.number("timestamp")), r.left());
      OffsetAndTimestamp at = found.get(tp);
      if (at == null) {
        throw new IllegalStateException("no offset at or after timestamp " + r.number("timestamp"));
      }
      c.assign(List.of(tp));
      c.seek(tp, at.offset());
      return records(pollN(c, r.n(), r.partition(), r));
    }
  }

  /** outOfRange: auto.offset.reset=earliest, so the consumer resets to the log start. */
  static ObjectNode outOfRange(Request r) throws Exception {
    try (KafkaConsumer<byte[], byte[]> c = consumer(r, r.consumer("consumer"))) {
      TopicPartition tp = new TopicPartition(r.topic(), r.partition());
      c.assign(List.of(tp));
      c.seek(tp, r.number("high"));
      return records(pollN(c, r.n(), r.partition(), r));
    }
  }

  /**
   * Member is one group member polled by a thread of its own (a KafkaConsumer is used from one
   * thread): it records its assignment after every poll and what it read, and commits the
   * offsets after what it read when asked to.
   */
  static final class Member implements Runnable {
    final KafkaConsumer<byte[], byte[]> consumer;
    final String topic;
    final Set<Integer> assigned = ConcurrentHashMap.newKeySet();
    final List<ObjectNode> read = new ArrayList<>(); // guarded by this
    final Map<TopicPartition, OffsetAndMetadata> next = new ConcurrentHashMap<>();
    volatile boolean commit;
    volatile boolean committed;
    volatile boolean stop;
    final AtomicReference<Throwable> failure = new AtomicReference<>();

    final boolean brokerRegex;

    Member(Request r, Properties p) {
      this.consumer = new KafkaConsumer<>(p);
      this.topic = r.topic();
      this.brokerRegex = r.json.path("extra").path("broker_regex").asBoolean(false);
    }

    @Override
    public void run() {
      try {
        if (brokerRegex) {
          // KIP-848's regex, resolved by the broker (RE2J, matching whole names): the
          // consumer learns its topics' names from Metadata by topic id.
          consumer.subscribe(new SubscriptionPattern(topic));
        } else {
          consumer.subscribe(List.of(topic));
        }
        while (!stop) {
          for (ConsumerRecord<byte[], byte[]> m : consumer.poll(Duration.ofMillis(50))) {
            synchronized (this) {
              read.add(Request.recOut(m));
            }
            next.put(new TopicPartition(m.topic(), m.partition()), new OffsetAndMetadata(m.offset() + 1));
          }
          Set<Integer> now = new TreeSet<>();
          for (TopicPartition tp : consumer.assignment()) {
            now.add(tp.partition());
          }
          assigned.retainAll(now);
          assigned.addAll(now);
          if (commit && !committed) {
            consumer.commitSync(next);
            committed = true;
          }
        }
      } catch (Throwable e) {
        failure.set(e);
      } finally {
        consumer.close(CLOSE);
      }
    }

    synchronized int count() {
      return read.size();
    }

    ObjectNode result() {
      ObjectNode o = Main.JSON.createObjectNode();
      ArrayNode a = o.putArray("assigned");
      new TreeSet<>(assigned).forEach(a::add);
      ArrayNode recs = o.putArray("records");
      synchronized (this) {
        recs.addAll(read);
      }
      return o;
    }
  }

  /** waitUntil polls cond until it holds, a member failed or the request's deadline passed. */
  static void waitUntil(Request r, String what, Collection<Member> ms, java.util.function.BooleanSupplier cond) throws Exception {
    while (!cond.getAsBoolean()) {
      for (Member m : ms) {
        if (m.failure.get() != null) {
          throw new Exception("member failed: " + what, m.failure.get());
        }
      }
      if (r.expired()) {
        throw r.timeout(what);
      }
      Thread.sleep(10);
    }
  }

  /**
   * group: two members of the request's group (by default the classic protocol with the
   * consumer's default assignors) split the topic's partitions; then the records are produced, read, and each
   * member commits what it read.
   */
  static ObjectNode group(Request r) throws Exception {
    Properties p = r.consumer("group");
    p.put(ConsumerConfig.GROUP_ID_CONFIG, r.text("group"));
    // The request's extra "group_protocol" ("consumer": KIP-848's protocol, the assignment
    // made by the broker) replaces the consumer's default, "classic".
    String protocol = r.json.path("extra").path("group_protocol").asText("");
    if (!protocol.isEmpty()) {
      p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    }
    List<Member> ms = List.of(new Member(r, p), new Member(r, r.consumerWith(p)));
    List<Thread> threads = new ArrayList<>();
    for (Member m : ms) {
      Thread t = new Thread(m);
      t.setDaemon(true);
      t.start();
      threads.add(t);
    }
    ObjectNode o = Main.JSON.createObjectNode();
    try {
      waitUntil(r, "partitions split between two members", ms, () -> {
        int a = ms.get(0).assigned.size(), b = ms.get(1).assigned.size();
        return a > 0 && b > 0 && a + b == 3;
      });
      Request plain = new Request(((ObjectNode) r.json.deepCopy()).put("codec", "none"));
      produce(plain);
      int n = r.json.path("records").size();
      waitUntil(r, "group read every record", ms, () -> ms.get(0).count() + ms.get(1).count() >= n);
      for (Member m : ms) {
        m.commit = true;
      }
      waitUntil(r, "both members committed", ms, () -> ms.get(0).committed && ms.get(1).committed);
      // The answer is taken before the members close: the first one's LeaveGroup starts a
      // rebalance that could hand the second every partition.
      ArrayNode members = o.putArray("members");
      for (Member m : ms) {
        members.add(m.result());
      }
    } finally {
      for (Member m : ms) {
        m.stop = true;
      }
      for (Thread t : threads) {
        t.join(CLOSE.toMillis() + 5000);
      }
    }
    return o;
  }
}
