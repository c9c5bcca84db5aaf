// The LongBench v1 task table (see longbench_task.h for the sources of every string).
#include "suite/benchmarks/longbench/longbench_task.h"

#include "base/errors.h"

namespace kvaudit::benchmarks {

const std::vector<LongBenchTaskSpec>& longbench_task_specs() {
  // Fields: name, prompt_template, chat_template, has_e_variant, kvpress_context_template,
  // kvpress_question_template, kvpress_answer_prefix, kvpress_input_suffix.
  // clang-format off
  static const std::vector<LongBenchTaskSpec> specs = {
      {"narrativeqa",
       "You are given a story, which can be either a novel or a movie script, and a question. Answer the question asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: {context}\n\nNow, answer the question based on the story asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
       true, false,
       "You are given a story, which can be either a novel or a movie script, and a question. Answer the question asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: {context}\n\nNow, answer the question based on the story asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n\n",
       "Question: {input}\n\n",
       "Answer:",
       ""},
      {"qasper",
       "You are given a scientific article and a question. Answer the question as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nArticle: {context}\n\n Answer the question based on the above article as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
       true, true,
       "You are given a scientific article and a question. Answer the question as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nArticle: {context}\n\n Answer the question based on the above article as concisely as you can, using a single phrase or sentence if possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\n",
       "Question: {input}\n\n",
       "Answer:",
       ""},
      {"multifieldqa_en",
       "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question based on the above text, only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
       true, true,
       "Read the following text and answer briefly.\n\n{context}\n\nNow, answer the following question based on the above text, only give me the answer and do not output any other words.\n\n",
       "Question: {input}\n",
       "Answer:",
       ""},
      {"multifieldqa_zh",
       "阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n问题：{input}\n回答：",
       true, false,
       "阅读以下文字并用中文简短回答：\n\n{context}\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n",
       "问题：{input}\n",
       "回答：",
       ""},
      {"hotpotqa",
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
       true, true,
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\n",
       "Question: {input}\n",
       "Answer:",
       ""},
      {"2wikimqa",
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
       true, true,
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\n",
       "Question: {input}\n",
       "Answer:",
       ""},
      {"musique",
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
       true, false,
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. Only give me the answer and do not output any other words.\n\n",
       "Question: {input}\n",
       "Answer:",
       ""},
      {"dureader",
       "请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答：",
       true, false,
       "请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n",
       "问题：{input}\n",
       "回答：",
       ""},
      {"gov_report",
       "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n{context}\n\nNow, write a one-page summary of the report.\n\nSummary:",
       true, true,
       "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n{context}\n\n",
       "Now, write a one-page summary of the report.\n\n",
       "Summary:",
       ""},
      {"qmsum",
       "You are given a meeting transcript and a query containing a question or instruction. Answer the query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in one or more sentences.\n\nQuery: {input}\nAnswer:",
       true, false,
       "You are given a meeting transcript and a query containing a question or instruction. Answer the query in one or more sentences.\n\nTranscript:\n{context}\n\nNow, answer the query based on the above meeting transcript in one or more sentences.\n\n",
       "Query: {input}\n",
       "Answer:",
       ""},
      {"multi_news",
       "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\nNow, write a one-page summary of all the news.\n\nSummary:",
       true, true,
       "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\n",
       "Now, write a one-page summary of all the news.\n\n",
       "Summary:",
       ""},
      {"vcsum",
       "下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结：",
       true, false,
       "下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n",
       "",
       "会议总结：",
       ""},
      {"trec",
       "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}",
       false, true,
       "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n",
       "{input}",
       "Type:",
       "Type:"},
      {"triviaqa",
       "Answer the question based on the given passage. Only give me the answer and do not output any other words. The following are some examples.\n\n{context}\n\n{input}",
       false, true,
       "Answer the question based on the given passage. Only give me the answer and do not output any other words. The following are some examples.\n\n{context}\n\n",
       "{input}",
       "Answer:",
       "Answer:"},
      {"samsum",
       "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n{input}",
       false, true,
       "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n",
       "{input}",
       "Summary:",
       "Summary:"},
      {"lsht",
       "请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}",
       false, false,
       "请判断给定新闻的类别，下面是一些例子。\n\n{context}\n",
       "{input}",
       "",
       ""},
      {"passage_count",
       "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, how many non-repeating paragraphs are there in total?\n\n{context}\n\nPlease enter the final count of unique paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and so on.\n\nThe final answer is: ",
       true, true,
       "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, how many non-repeating paragraphs are there in total?\n\n{context}\n\n",
       "Please enter the final count of unique paragraphs after removing duplicates. The output format should only contain the number, such as 1, 2, 3, and so on.\n\n",
       "The final answer is: ",
       ""},
      {"passage_retrieval_en",
       "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter the number of the paragraph that the abstract is from. The answer format must be like \"Paragraph 1\", \"Paragraph 2\", etc.\n\nThe answer is: ",
       true, true,
       "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n",
       "{input}\n\nPlease enter the number of the paragraph that the abstract is from. The answer format must be like \"Paragraph 1\", \"Paragraph 2\", etc.\n\n",
       "The answer is: ",
       ""},
      {"passage_retrieval_zh",
       "以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n{input}\n\n请输入摘要所属段落的编号。答案格式必须是\"段落1\"，\"段落2\"等格式\n\n答案是：",
       true, false,
       "以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n",
       "{input}\n\n请输入摘要所属段落的编号。答案格式必须是\"段落1\"，\"段落2\"等格式\n\n",
       "答案是：",
       ""},
      {"lcc",
       "Please complete the code given below. \n{context}Next line of code:\n",
       false, true,
       "Please complete the code given below. \n{context}",
       "{input}",
       "Next line of code:\n",
       ""},
      {"repobench-p",
       "Please complete the code given below. \n{context}{input}Next line of code:\n",
       false, true,
       "Please complete the code given below. \n{context}",
       "{input}",
       "Next line of code:\n",
       ""},
  };
  // clang-format on
  return specs;
}

LongBenchTaskRef resolve_longbench_task(std::string_view name) {
  constexpr std::string_view e_suffix = "_e";
  std::string_view base = name;
  bool e_variant = false;
  if (name.size() > e_suffix.size() && name.ends_with(e_suffix)) {
    base = name.substr(0, name.size() - e_suffix.size());
    e_variant = true;
  }
  for (const LongBenchTaskSpec& spec : longbench_task_specs()) {
    if (spec.name != base || (e_variant && !spec.has_e_variant)) continue;
    const TaskSpec* catalog = find_task(BenchmarkKind::longbench, spec.name);
    if (catalog == nullptr) {
      throw InternalError(
          "longbench: task '" + std::string(spec.name) +
          "' is missing from the task catalogue (suite/benchmarks/task_catalog.cpp)");
    }
    return LongBenchTaskRef{&spec, catalog, e_variant, std::string(name)};
  }
  std::string e_names;
  for (const LongBenchTaskSpec& spec : longbench_task_specs()) {
    if (!spec.has_e_variant) continue;
    if (!e_names.empty()) e_names += ", ";
    e_names += std::string(spec.name) + "_e";
  }
  throw InputError("longbench: unknown task '" + std::string(name) +
                   "'; LongBench tasks are: " + task_name_list(BenchmarkKind::longbench) +
                   "; LongBench-E tasks are: " + e_names);
}

int longbench_max_new_tokens(const LongBenchTaskRef& task) { return task.catalog->max_new_tokens; }

int kvpress_max_new_tokens(const LongBenchTaskRef& task) {
  return task.catalog->max_new_tokens + 20;
}

}  // namespace kvaudit::benchmarks
