package gregor.compat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.protocol.Errors;

/** How an error the client reported is described to the suite. */
final class Errs {
  private Errs() {}

  /** unwrap strips the wrappers of a future's failure. */
  static Throwable unwrap(Throwable e) {
    while ((e instanceof ExecutionException || e instanceof CompletionException) && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  /**
   * classify is the error's exception class (simple name), the Kafka error it or one of its
   * causes maps to (Errors.forException; "" when none does), and its message.
   */
  static ObjectNode classify(Throwable e) {
    e = unwrap(e);
    String code = "";
    for (Throwable x = e; x != null && code.isEmpty(); x = x.getCause()) {
      Errors err = Errors.forException(x);
      if (err != Errors.UNKNOWN_SERVER_ERROR) {
        code = err.name();
      }
    }
    ObjectNode out = Main.JSON.createObjectNode();
    out.put("type", e.getClass().getSimpleName());
    out.put("code", code);
    out.put("message", String.valueOf(e.getMessage()));
    return out;
  }
}
