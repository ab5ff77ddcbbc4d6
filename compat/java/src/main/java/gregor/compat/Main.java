package gregor.compat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Kafka's Java client (org.apache.kafka:kafka-clients) driven by Gregor's compatibility suite.
 *
 * <p>Two ways to run it, with the request and response of compat/script_test.go (bytes as
 * base64):
 *
 * <ul>
 *   <li>{@code java -cp ... gregor.compat.Main <op>}: one request on stdin, one response on
 *       stdout, as the other languages' scripts are run;
 *   <li>{@code java -cp ... gregor.compat.Main serve}: a long-running process, so that the
 *       JVM starts once per test run instead of once per step. It reads one line per request,
 *       {"id": N, "op": "...", "req": {...}}, runs each in a thread of its own (requests run
 *       concurrently, as the suite's tests do), and writes one line per answer, {"id": N,
 *       "resp": {...}}, in the order they finish. It exits when stdin closes.
 * </ul>
 *
 * An error the client reported comes back as the response's "error" (its exception class, the
 * Kafka error it carries and its message); anything else is a stack trace on stderr.
 */
public final class Main {
  static final ObjectMapper JSON = new ObjectMapper();

  private Main() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: gregor.compat.Main <op>|serve");
      System.exit(2);
    }
    // stdout carries only the answers: anything else printing there would corrupt them.
    PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
    System.setOut(System.err);
    if (args[0].equals("serve")) {
      serve(out);
      return;
    }
    JsonNode req = JSON.readTree(System.in);
    out.println(JSON.writeValueAsString(run(args[0], req == null || req.isMissingNode() ? JSON.createObjectNode() : req)));
    out.flush();
    System.exit(0);
  }

  private static void serve(PrintStream out) throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r);
      t.setDaemon(true);
      return t;
    });
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      if (line.isBlank()) {
        continue;
      }
      JsonNode msg = JSON.readTree(line);
      long id = msg.path("id").asLong();
      String op = msg.path("op").asText();
      JsonNode req = msg.path("req");
      pool.execute(() -> {
        ObjectNode answer = JSON.createObjectNode();
        answer.put("id", id);
        answer.set("resp", run(op, req));
        String text;
        try {
          text = JSON.writeValueAsString(answer);
        } catch (Exception e) {
          e.printStackTrace();
          text = "{\"id\":" + id + ",\"resp\":{\"error\":{\"type\":\"EncodeError\",\"code\":\"\",\"message\":\"" + e.getClass().getSimpleName() + "\"}}}";
        }
        synchronized (out) {
          out.println(text);
          out.flush();
        }
      });
    }
    // stdin closed: the suite is done; in-flight requests are abandoned.
    System.exit(0);
  }

  /** run answers one request; a client error becomes the response's error. */
  static JsonNode run(String op, JsonNode req) {
    Request r = new Request(req);
    try {
      return switch (op) {
        case "version" -> Ops.version();
        case "admin" -> Ops.admin(r);
        case "admin-tour" -> AdminTour.run(r);
        case "produce" -> Ops.produce(r);
        case "produce-unknown" -> Ops.produceUnknown(r);
        case "consume" -> Ops.consume(r);
        case "seek-offset" -> Ops.seekOffset(r);
        case "seek-time" -> Ops.seekTime(r);
        case "out-of-range" -> Ops.outOfRange(r);
        case "group" -> Ops.group(r);
        case "txn-produce" -> TxnOps.txnProduce(r);
        case "txn-consume" -> TxnOps.txnConsume(r);
        case "transform" -> TxnOps.transform(r);
        case "fence" -> TxnOps.fence(r);
        default -> throw new IllegalArgumentException("unknown op " + op);
      };
    } catch (Throwable e) {
      System.err.println("op " + op + " (topic " + req.path("topic").asText() + "):");
      e.printStackTrace();
      ObjectNode resp = JSON.createObjectNode();
      resp.set("error", Errs.classify(e));
      return resp;
    }
  }
}
