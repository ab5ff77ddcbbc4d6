package gregor.compat;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.quota.ClientQuotaFilter;

/**
 * adminTour calls the Java Admin client's read-only APIs beyond the scenario's admin step on
 * the request's topic (which holds records) and answers, per call, "ok" or the error it
 * reported, so that the suite fails on any the broker answers differently from Kafka.
 */
final class AdminTour {
  private AdminTour() {}

  static ObjectNode run(Request r) throws Exception {
    String topic = r.topic();
    TopicPartition tp = new TopicPartition(topic, 0);
    ObjectNode calls = Main.JSON.createObjectNode();
    try (Admin adm = Admin.create(r.base("admin-tour"))) {
      call(calls, "describeCluster", () -> adm.describeCluster().nodes().get(30, TimeUnit.SECONDS).size() == 1);
      call(calls, "describeMetadataQuorum", () -> {
        QuorumInfo q = adm.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS);
        return q.leaderId() >= 0 && !q.voters().isEmpty();
      });
      call(calls, "describeFeatures", () -> adm.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS) != null);
      call(calls, "describeTopics by id", () -> {
        Uuid id = adm.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic).topicId();
        Map<Uuid, TopicDescription> byID = adm.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds().get(30, TimeUnit.SECONDS);
        return byID.get(id) != null && byID.get(id).name().equals(topic);
      });
      call(calls, "describeClientQuotas", () -> adm.describeClientQuotas(ClientQuotaFilter.all()).entities().get(30, TimeUnit.SECONDS) != null);
      call(calls, "describeUserScramCredentials", () -> adm.describeUserScramCredentials().all().get(30, TimeUnit.SECONDS) != null);
      for (Map.Entry<String, OffsetSpec> spec : Map.of("earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
          "maxTimestamp", OffsetSpec.maxTimestamp(), "earliestLocal", OffsetSpec.earliestLocal(),
          "latestTiered", OffsetSpec.latestTiered(), "forTimestamp", OffsetSpec.forTimestamp(0)).entrySet()) {
        call(calls, "listOffsets " + spec.getKey(), () -> adm.listOffsets(Map.of(tp, spec.getValue())).all().get(30, TimeUnit.SECONDS).get(tp) != null);
      }
      call(calls, "describeLogDirs", () -> !adm.describeLogDirs(List.of(1)).allDescriptions().get(30, TimeUnit.SECONDS).isEmpty());
      call(calls, "describeProducers", () -> adm.describeProducers(List.of(tp)).all().get(30, TimeUnit.SECONDS).get(tp) != null);
      call(calls, "listTransactions", () -> adm.listTransactions().all().get(30, TimeUnit.SECONDS) != null);
      call(calls, "listGroups", () -> adm.listGroups().all().get(30, TimeUnit.SECONDS) != null);
      call(calls, "listPartitionReassignments", () -> adm.listPartitionReassignments().reassignments().get(30, TimeUnit.SECONDS) != null);
      call(calls, "describeReplicaLogDirs", () -> !adm.describeReplicaLogDirs(List.of(new org.apache.kafka.common.TopicPartitionReplica(topic, 0, 1)))
          .all().get(30, TimeUnit.SECONDS).isEmpty());
      call(calls, "deleteRecords", () -> adm.deleteRecords(Map.of(tp, org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(1)))
          .all().get(30, TimeUnit.SECONDS) == null);
      call(calls, "describeConsumerGroups none", () -> adm.describeConsumerGroups(Set.of()).all().get(30, TimeUnit.SECONDS).isEmpty());
    }
    ObjectNode o = Main.JSON.createObjectNode();
    o.set("calls", calls);
    return o;
  }

  /** call records "ok" when fn holds, "unexpected answer" when not, or the error it threw. */
  private static void call(ObjectNode calls, String name, Callable<Boolean> fn) {
    try {
      calls.put(name, fn.call() ? "ok" : "unexpected answer");
    } catch (Throwable e) {
      System.err.println("admin call " + name + ":");
      e.printStackTrace();
      ObjectNode err = Errs.classify(e);
      calls.put(name, err.path("type").asText() + " " + err.path("code").asText() + ": " + err.path("message").asText());
    }
  }
}
