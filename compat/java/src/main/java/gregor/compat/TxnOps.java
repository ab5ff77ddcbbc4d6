package gregor.compat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/** The transactional ops (the TxnClient interface of compat/txn_test.go). */
final class TxnOps {
  private static final Duration CLOSE = Duration.ofSeconds(10);

  private TxnOps() {}

  /** txnProducer is a transactional producer as Kafka's documentation sets one up, initialised. */
  static KafkaProducer<byte[], byte[]> txnProducer(Request r, String txnID) {
    Properties p = r.producer("txn");
    p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
    KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p);
    try {
      prod.initTransactions();
    } catch (RuntimeException e) {
      prod.close(CLOSE);
      throw e;
    }
    return prod;
  }

  static ObjectNode txnProduce(Request r) throws Exception {
    try (KafkaProducer<byte[], byte[]> prod = txnProducer(r, r.text("transactional_id"))) {
      prod.beginTransaction();
      try {
        Ops.send(prod, r.records(r.topic()), r);
      } catch (Exception e) {
        prod.abortTransaction();
        throw e;
      }
      if (r.flag("commit")) {
        prod.commitTransaction();
      } else {
        prod.abortTransaction();
      }
      prod.close(CLOSE);
    }
    return Main.JSON.createObjectNode();
  }

  static ObjectNode txnConsume(Request r) throws Exception {
    Properties p = r.consumer("txn-consumer");
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, r.flag("read_committed") ? "read_committed" : "read_uncommitted");
    return Ops.readAll(r, p);
  }

  /**
   * transform is Kafka's consume-transform-produce loop: a read_committed group member
   * copies each poll's records to the same partition of the output in one transaction that
   * also sends the member's next offsets (sendOffsetsToTransaction with its group metadata).
   */
  static ObjectNode transform(Request r) throws Exception {
    Properties cp = r.consumer("transform");
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, r.text("group"));
    cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    String out = r.text("output");
    int n = r.n();
    try (KafkaProducer<byte[], byte[]> prod = txnProducer(r, r.text("transactional_id"));
         KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
      c.subscribe(List.of(r.topic()));
      int copied = 0;
      while (copied < n) {
        if (r.expired()) {
          throw r.timeout("copied " + copied + " of " + n + " records");
        }
        ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(100));
        if (recs.isEmpty()) {
          continue;
        }
        prod.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> m : recs) {
          prod.send(new ProducerRecord<>(out, m.partition(), null, m.key(), m.value(), m.headers()));
          next.put(new TopicPartition(m.topic(), m.partition()), new OffsetAndMetadata(m.offset() + 1));
        }
        prod.sendOffsetsToTransaction(next, c.groupMetadata());
        prod.commitTransaction();
        copied += recs.count();
      }
      prod.close(CLOSE);
    }
    return Main.JSON.createObjectNode();
  }

  /** Step is a call to the client that may throw. */
  interface Step {
    void run() throws Exception;
  }

  /** errOf runs fn and describes what it threw (null: it succeeded). */
  static ObjectNode errOf(Step fn) {
    try {
      fn.run();
      return null;
    } catch (Throwable e) {
      System.err.println("fenced producer:");
      e.printStackTrace();
      return Errs.classify(e);
    }
  }

  static ObjectNode fence(Request r) throws Exception {
    List<ProducerRecord<byte[], byte[]>> recs = r.records(r.topic());
    String txnID = r.text("transactional_id");
    try (KafkaProducer<byte[], byte[]> a = txnProducer(r, txnID)) {
      a.beginTransaction();
      Ops.send(a, List.of(recs.get(0)), r);
      try (KafkaProducer<byte[], byte[]> b = txnProducer(r, txnID)) { // InitProducerId fences a
        b.beginTransaction();
        Ops.send(b, List.of(recs.get(1)), r);
        b.commitTransaction();
        b.close(CLOSE);
      }
      ObjectNode fence = Main.JSON.createObjectNode();
      fence.set("write", errOf(() -> Ops.send(a, List.of(recs.get(2)), r)));
      fence.set("commit", errOf(a::commitTransaction));
      a.close(CLOSE);
      ObjectNode o = Main.JSON.createObjectNode();
      o.set("fence", fence);
      return o;
    }
  }
}
