package gregor.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One request of the suite (compat/script_test.go's scriptRequest): its fields, its deadline,
 * and the client configuration it implies (bootstrap address and, for a secured listener, the
 * security settings a Java client's user would write).
 */
final class Request {
  private static final AtomicLong SEQ = new AtomicLong();

  final JsonNode json;
  /** When the request gives up waiting for records (System.nanoTime), from its "timeout". */
  final long deadline;

  Request(JsonNode json) {
    this.json = json;
    double seconds = json.path("timeout").asDouble(0);
    if (seconds <= 0) {
      seconds = 60;
    }
    this.deadline = System.nanoTime() + (long) (seconds * 1e9);
  }

  String topic() {
    return json.path("topic").asText();
  }

  int partition() {
    return json.path("partition").asInt();
  }

  int n() {
    return json.path("n").asInt();
  }

  String text(String field) {
    return json.path(field).asText();
  }

  long number(String field) {
    return json.path(field).asLong();
  }

  boolean flag(String field) {
    return json.path(field).asBoolean(false);
  }

  Duration left() {
    return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
  }

  boolean expired() {
    return System.nanoTime() - deadline > 0;
  }

  /** timeout fails a wait that reached the request's deadline. */
  TimeoutException timeout(String what) {
    return new TimeoutException("timed out: " + what);
  }

  /** base is the configuration every client of the request shares. */
  Properties base(String role) {
    Properties p = new Properties();
    p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, json.path("addr").asText());
    // Client ids are unique within the JVM, which runs many clients at once.
    p.put(CommonClientConfigs.CLIENT_ID_CONFIG, "gregor-compat-" + role + "-" + SEQ.incrementAndGet());
    JsonNode sec = json.path("security");
    if (sec.isObject()) {
      security(p, sec);
    }
    return p;
  }

  /**
   * security sets what a Java client needs for a secured listener: the CA as a PEM trust
   * store, SCRAM through its JAAS line, and for mutual TLS the client's certificate chain and
   * PKCS#8 key as a PEM key store (inline, as ssl.keystore.certificate.chain and
   * ssl.keystore.key take them).
   */
  private static void security(Properties p, JsonNode sec) {
    p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, sec.path("protocol").asText());
    p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
    p.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, sec.path("ca").asText());
    String mech = sec.path("mechanism").asText("");
    if (!mech.isEmpty()) {
      p.put(SaslConfigs.SASL_MECHANISM, mech);
      String module = mech.startsWith("SCRAM-")
          ? "org.apache.kafka.common.security.scram.ScramLoginModule"
          : "org.apache.kafka.common.security.plain.PlainLoginModule";
      String token = sec.path("tokenauth").asText("").equals("true") ? " tokenauth=\"true\"" : "";
      p.put(SaslConfigs.SASL_JAAS_CONFIG, module + " required username=\"" + sec.path("username").asText()
          + "\" password=\"" + sec.path("password").asText() + "\"" + token + ";");
    }
    String cert = sec.path("cert").asText("");
    if (!cert.isEmpty()) {
      try {
        p.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
        p.put(SslConfigs.SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG, Files.readString(Path.of(cert), StandardCharsets.US_ASCII));
        p.put(SslConfigs.SSL_KEYSTORE_KEY_CONFIG, Files.readString(Path.of(sec.path("key").asText()), StandardCharsets.US_ASCII));
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }
  }

  Properties producer(String role) {
    Properties p = base(role);
    p.put("key.serializer", ByteArraySerializer.class.getName());
    p.put("value.serializer", ByteArraySerializer.class.getName());
    return p;
  }

  /** consumer is a consumer's configuration: no group unless one is set, no auto commit. */
  Properties consumer(String role) {
    Properties p = base(role);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    return p;
  }

  /** consumerWith is a copy of p with a client id of its own. */
  Properties consumerWith(Properties p) {
    Properties q = new Properties();
    q.putAll(p);
    q.put(CommonClientConfigs.CLIENT_ID_CONFIG, "gregor-compat-group-" + SEQ.incrementAndGet());
    return q;
  }

  // --- records ---

  static byte[] unb64(JsonNode n) {
    return n == null || n.isNull() || n.isMissingNode() ? null : Base64.getDecoder().decode(n.asText());
  }

  /** records is the request's records as ProducerRecords to topic (partition -1: the partitioner's). */
  List<ProducerRecord<byte[], byte[]>> records(String topic) {
    List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
    for (JsonNode r : json.path("records")) {
      int part = r.path("partition").asInt(-1);
      long ts = r.path("timestamp").asLong(0);
      List<Header> headers = new ArrayList<>();
      for (JsonNode h : r.path("headers")) {
        headers.add(new RecordHeader(h.path("key").asText(), unb64(h.get("value"))));
      }
      out.add(new ProducerRecord<>(topic, part >= 0 ? part : null, ts != 0 ? ts : null,
          unb64(r.get("key")), unb64(r.get("value")), headers));
    }
    return out;
  }

  static ObjectNode recOut(ConsumerRecord<byte[], byte[]> m) {
    ObjectNode o = Main.JSON.createObjectNode();
    o.put("partition", m.partition());
    o.put("offset", m.offset());
    o.put("key", m.key() == null ? null : Base64.getEncoder().encodeToString(m.key()));
    o.put("value", m.value() == null ? null : Base64.getEncoder().encodeToString(m.value()));
    Header[] hs = m.headers().toArray();
    if (hs.length == 0) {
      o.putNull("headers");
    } else {
      ArrayNode arr = o.putArray("headers");
      for (Header h : hs) {
        ObjectNode ho = arr.addObject();
        ho.put("key", h.key());
        ho.put("value", h.value() == null ? null : Base64.getEncoder().encodeToString(h.value()));
      }
    }
    o.put("timestamp", m.timestamp());
    return o;
  }
}
